-- The keys of a write (every write script starts with this file, scripts/__init__.py). On a
-- Redis Cluster (ONE_KEY false) the store passes all six: a cluster checks the keys passed,
-- and moves a call whose slot moved, before it runs a script. On one Redis it passes only
-- the questionnaire's hash, and the session's keys are named from it here: each key passed
-- is one more argument to pack and to parse, on every answer.
-- Returns the session's prefix ('qb:{sid}:'), the questionnaire's id, the six keys
-- (questionnaire hash, queue, seq, inbox, events, history: an older broker's inbox and
-- events included) and how many KEYS they took (what a script is passed after them follows).
local function write_keys()
  if ONE_KEY then
    local cut = string.find(KEYS[1], '}:q:', 1, true)  -- (no '}' in a session id)
    local session, id = string.sub(KEYS[1], 1, cut + 1), string.sub(KEYS[1], cut + 4)
    return session, id,
      {KEYS[1], session .. 'queue', session .. 'seq', session .. 'inbox', session .. 'ev:' .. id, session .. 'history'}, 1
  end
  local session = string.sub(KEYS[3], 1, -4)  -- (the seq key without 'seq')
  return session, string.sub(KEYS[1], #session + 3), KEYS, 6  -- (the hash is the session's 'q:' .. id)
end
