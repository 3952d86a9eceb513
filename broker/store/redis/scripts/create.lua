-- A write script: scripts/__init__.py puts the prelude (PUBLISH, INDEXED) and msgpack.lua before it.
-- KEYS: questionnaire hash, queue, seq, inbox, events, history[, the inbox index shard when
--       INDEXED][, idempotency key]
-- ARGV: id, version, record, retention ms, notice prefix, notice record limit, inbox entry, session id,
--       event...
-- Returns {1, seq} when stored, {0, record} when the idempotency key names a live questionnaire.
-- INDEXED (one Redis, where a script may reach the shard's key): the session joins its inbox
-- index shard and the notice goes on the shard's channel too, in the same step; on a cluster
-- the store does both after the script (store.py).
local session = string.sub(KEYS[3], 1, -4)  -- 'qb:{sid}:' (the seq key without 'seq')
local idempotency = KEYS[INDEXED and 8 or 7]
if idempotency then
  local known = redis.call('GET', idempotency)
  if known then
    local record = redis.call('HGET', session .. 'q:' .. known, 's')
    if record then return {0, record} end
  end
  redis.call('SET', idempotency, ARGV[1], 'PX', ARGV[4])
end
local seq = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], 'v', ARGV[2], 's', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[2], 'NX', seq, ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
redis.call('HSET', KEYS[4], ARGV[1], ARGV[7])
redis.call('PEXPIRE', KEYS[4], ARGV[4])
if #ARGV > 8 then
  redis.call('DEL', KEYS[5])  -- (a questionnaire id is new: nothing to keep)
  redis.call('RPUSH', KEYS[5], unpack(ARGV, 9))
  redis.call('PEXPIRE', KEYS[5], ARGV[4])
end
-- The history, scored by the write number (newest last); the oldest entries whose
-- questionnaire expired leave it on the way, a couple per start.
for _, id in ipairs(redis.call('ZRANGE', KEYS[6], 0, 1)) do
  if redis.call('EXISTS', session .. 'q:' .. id) == 0 then redis.call('ZREM', KEYS[6], id) end
end
redis.call('ZADD', KEYS[6], seq, ARGV[1])
redis.call('PEXPIRE', KEYS[6], ARGV[4])
local notice = notice_of(ARGV[5], ARGV[3], tonumber(ARGV[6]), seq, '\192')
redis.call(PUBLISH, session .. 'events', notice)
if INDEXED then
  redis.call('ZADD', KEYS[7], 0, ARGV[8])
  redis.call(PUBLISH, KEYS[7] .. ':events', notice)
end
return {1, seq}
