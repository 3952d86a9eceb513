-- A write script: scripts/__init__.py puts the prelude (PUBLISH) and msgpack.lua before it.
-- KEYS: questionnaire hash, queue, seq, inbox[, idempotency key]
-- ARGV: id, version, record, retention ms, notice prefix, notice record limit, inbox entry
-- Returns {1, seq} when stored, {0, record} when the idempotency key names a live questionnaire.
local session = string.sub(KEYS[3], 1, -4)  -- 'qb:{sid}:' (the seq key without 'seq')
if KEYS[5] then
  local known = redis.call('GET', KEYS[5])
  if known then
    local record = redis.call('HGET', session .. 'q:' .. known, 's')
    if record then return {0, record} end
  end
  redis.call('SET', KEYS[5], ARGV[1], 'PX', ARGV[4])
end
local seq = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], 'v', ARGV[2], 's', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[2], 'NX', seq, ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
redis.call('HSET', KEYS[4], ARGV[1], ARGV[7])
redis.call('PEXPIRE', KEYS[4], ARGV[4])
redis.call(PUBLISH, session .. 'events', notice_of(ARGV[5], ARGV[3], tonumber(ARGV[6]), seq, '\192'))
return {1, seq}
