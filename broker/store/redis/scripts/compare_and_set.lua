-- A write script: scripts/__init__.py puts the prelude (PUBLISH) and msgpack.lua before it.
-- KEYS: questionnaire hash, queue, seq, inbox, events, history
-- ARGV: expected version, new version, record, retention ms, '1' if terminal, id, notice prefix,
--       notice record limit, '1' if an outcome (the notice also goes to the outcomes channel),
--       the inbox entry (of an open state), the length of its prefix that says its step and
--       status (a stored entry with the same prefix stays: a draft does not move it),
--       event... (appended to the questionnaire's)
-- Returns 0 when the version moved on; else {seq} or, for a terminal state, {seq, 1, head
-- record} ({seq, 1}: the queue is empty now); {0} for a retry that finds its own write.
local current = redis.call('HGET', KEYS[1], 'v')
if current ~= ARGV[1] then
  -- A retry finds its own write:
  if current == ARGV[2] and redis.call('HGET', KEYS[1], 's') == ARGV[3] then return {0} end
  return 0
end
local session = string.sub(KEYS[3], 1, -4)  -- 'qb:{sid}:' (the seq key without 'seq')
local seq = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], 'v', ARGV[2], 's', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
if #ARGV > 11 then redis.call('RPUSH', KEYS[5], unpack(ARGV, 12)) end
redis.call('PEXPIRE', KEYS[5], ARGV[4])  -- the events and the history live as long as it does
redis.call('PEXPIRE', KEYS[6], ARGV[4])
local reply = {seq}
local head = '\192'  -- nil: not said
if ARGV[5] == '1' then
  redis.call('ZREM', KEYS[2], ARGV[6])
  redis.call('HDEL', KEYS[4], ARGV[6])
  reply = {seq, 1}
  head = '\194'  -- false: no open questionnaire left
  while true do  -- the next head; ids whose questionnaire expired leave the queue on the way
    local first = redis.call('ZRANGE', KEYS[2], 0, 0)
    if #first == 0 then break end
    local record = redis.call('HGET', session .. 'q:' .. first[1], 's')
    if record then
      reply = {seq, 1, record}
      head = msgpack_record(record, tonumber(ARGV[8]))
      break
    end
    redis.call('ZREM', KEYS[2], first[1])
    redis.call('HDEL', KEYS[4], first[1])
  end
else
  local moment = tonumber(ARGV[11])
  local entry = redis.call('HGET', KEYS[4], ARGV[6])
  if not entry or string.sub(entry, 1, moment) ~= string.sub(ARGV[10], 1, moment) then
    redis.call('HSET', KEYS[4], ARGV[6], ARGV[10])
  end
end
redis.call('PEXPIRE', KEYS[2], ARGV[4])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
redis.call('PEXPIRE', KEYS[4], ARGV[4])
local notice = notice_of(ARGV[7], ARGV[3], tonumber(ARGV[8]), seq, head)
redis.call(PUBLISH, session .. 'events', notice)
if ARGV[9] == '1' then
  redis.call(PUBLISH, session .. 'outcomes', notice)
end
return reply
