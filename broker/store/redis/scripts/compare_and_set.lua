-- A write script: scripts/__init__.py puts the prelude (PUBLISH, ONE_KEY), msgpack.lua,
-- expiry.lua and write_keys.lua before it.
-- KEYS: the write's keys (write_keys.lua)
-- ARGV: 'expected version, new version, flags, retention ms, notice record limit, moment, now'
--       (one string, space separated: one argument to pack, not seven; flags: 1 when the state
--       is terminal, + 2 when it is an outcome: the notice also goes to the outcomes channel;
--       moment: the length of the inbox entry's prefix that says its step and status, so an
--       entry whose moment did not change stays as it is and a draft does not move it; now: ms,
--       the broker's clock), the record, the notice prefix, the inbox entry (of an open state;
--       '' for none), event... (appended to the questionnaire's)
-- Returns 0 when the version moved on; else {seq} or, for a terminal state, {seq, 1, head
-- record} ({seq, 1}: the queue is empty now); {0} for a retry that finds its own write.
--
-- The hash keeps beside the version (v) and the record (s) when its keys expire (x, ms), its
-- inbox entry (i) and its events (e: n of them, packed one after the other), so one HMGET
-- tells what else the write must touch, and one HSET writes the state, its entry and its
-- events. Its keys, and the session's, are renewed only when their expiry is due (expiry.lua).
local expected, version, flags, retention, limit, moment, now =
  string.match(ARGV[1], '^(%d+) (%d+) (%d) (%d+) (%d+) (%d+) (%d+)$')
if not expected then return redis.error_reply('ERR qbroker compare-and-set: malformed numbers') end
local terminal, outcome = flags == '1' or flags == '3', flags == '3' or flags == '2'
retention, limit, moment, now = tonumber(retention), tonumber(limit), tonumber(moment), tonumber(now)
local record, entry = ARGV[2], ARGV[4]
local session, id, K = write_keys()
local queue, seq_key, history = K[2], K[3], K[6]
local stored = redis.call('HMGET', KEYS[1], 'v', 'x', 'i', 'n', 'e')
if stored[1] ~= expected then
  -- A retry finds its own write:
  if stored[1] == version and redis.call('HGET', KEYS[1], 's') == record then return {0} end
  return 0
end
local seq = redis.call('INCR', seq_key)
local renew = renewal_due(tonumber(stored[2]), now, retention)
local fields = {'v', version, 's', record}
if renew then
  fields[#fields + 1] = 'x'
  fields[#fields + 1] = string.format('%.0f', now + retention)
end
local moved = not terminal and entry ~= ''  -- ('': no entry to keep)
  and (not stored[3] or string.sub(stored[3], 1, moment) ~= string.sub(entry, 1, moment))
if moved then
  fields[#fields + 1] = 'i'
  fields[#fields + 1] = entry
elseif terminal and stored[3] then  -- (ended: out of the inbox, and its bytes with it)
  fields[#fields + 1] = 'i'
  fields[#fields + 1] = ''
end
local listed = stored[4] == false and #ARGV > 4  -- (no n: created by an older broker, events in a list)
if stored[4] and #ARGV > 4 then
  fields[#fields + 1] = 'e'
  fields[#fields + 1] = (stored[5] or '') .. table.concat(ARGV, '', 5, #ARGV)
  fields[#fields + 1] = 'n'
  fields[#fields + 1] = tonumber(stored[4]) + #ARGV - 4
end
redis.call('HSET', KEYS[1], unpack(fields))
if listed and redis.call('RPUSH', K[5], unpack(ARGV, 5)) == #ARGV - 4 and not renew then
  redis.call('PEXPIRE', K[5], redis.call('PTTL', K[1]))  -- (its first events: a new key)
end
if renew then  -- the questionnaire's keys, and the session's that must outlive them
  for i = 1, 6 do redis.call('PEXPIRE', K[i], retention) end
end
local reply = {seq}
local head = '\192'  -- nil: not said
if terminal then
  redis.call('ZREM', queue, id)
  if not stored[3] then redis.call('HDEL', K[4], id) end  -- (an older broker's entry)
  reply = {seq, 1}
  head = '\194'  -- false: no open questionnaire left
  while true do  -- the next head; ids whose questionnaire expired leave the queue on the way
    local first = redis.call('ZRANGE', queue, 0, 0)
    if #first == 0 then break end
    local record = redis.call('HGET', session .. 'q:' .. first[1], 's')
    if record then
      reply = {seq, 1, record}
      head = msgpack_record(record, limit)
      break
    end
    redis.call('ZREM', queue, first[1])
  end
end
local notice = notice_of(ARGV[3], record, limit, seq, head)
redis.call(PUBLISH, session .. 'events', notice)
if outcome then
  redis.call(PUBLISH, session .. 'outcomes', notice)
end
return reply
