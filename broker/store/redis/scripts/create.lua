-- A write script: scripts/__init__.py puts the prelude (PUBLISH, INDEXED), msgpack.lua and
-- expiry.lua before it.
-- KEYS: questionnaire hash, queue, seq, inbox (an older broker's), events (an older broker's),
--       history[, the inbox index shard when INDEXED][, idempotency key]
-- ARGV: id, version, record, retention ms, notice prefix, notice record limit, inbox entry, session id,
--       now (ms, the broker's clock), event...
-- Returns {1, seq} when stored, {0, record} when the idempotency key names a live questionnaire.
-- INDEXED (one Redis, where a script may reach the shard's key): the session joins its inbox
-- index shard and the notice goes on the shard's channel too, in the same step; on a cluster
-- the store does both after the script (store.py).
local session = string.sub(KEYS[3], 1, -4)  -- 'qb:{sid}:' (the seq key without 'seq')
local idempotency = KEYS[INDEXED and 8 or 7]
if idempotency then
  local known = redis.call('SET', idempotency, ARGV[1], 'NX', 'GET', 'PX', ARGV[4])
  if known then
    local record = redis.call('HGET', session .. 'q:' .. known, 's')
    if record then return {0, record} end
    redis.call('SET', idempotency, ARGV[1], 'PX', ARGV[4])  -- (its questionnaire expired)
  end
end
local seq = redis.call('INCR', KEYS[3])
-- The questionnaire expires with the session's keys (they must outlive it): renewed with
-- them when their expiry is due (expiry.lua), else as they are.
local retention, now = tonumber(ARGV[4]), tonumber(ARGV[9])
local left = redis.call('PTTL', KEYS[3])
local renew = renewal_due(left >= 0 and now + left or nil, now, retention)
if renew then left = retention end
-- Its inbox entry (i) and its events (e: n of them, packed one after the other) are fields
-- of the hash (compare_and_set.lua), written with it (a create run again, its first reply
-- lost, writes the same ones again).
redis.call('HSET', KEYS[1], 'v', ARGV[2], 's', ARGV[3], 'x', string.format('%.0f', now + left), 'i', ARGV[7],
  'n', #ARGV - 9, 'e', table.concat(ARGV, '', 10, #ARGV))
redis.call('PEXPIRE', KEYS[1], left)
redis.call('ZADD', KEYS[2], 'NX', seq, ARGV[1])
redis.call('PEXPIRE', KEYS[2], left)  -- (the queue may be new: emptied, it went)
-- The history, scored by the write number (newest last); of its two oldest entries, those
-- whose questionnaire expired leave it on the way (it shrinks under a steady load, and one
-- long-lived questionnaire at its head does not hold the others back).
local oldest = redis.call('ZRANGE', KEYS[6], 0, 1)
local dropped = 0
if #oldest > 0 then  -- (one EXISTS of both; when one of two is gone, one more says which)
  local names = {}
  for i, id in ipairs(oldest) do names[i] = session .. 'q:' .. id end
  local live = redis.call('EXISTS', unpack(names))
  if live == 0 then
    redis.call('ZREM', KEYS[6], unpack(oldest))
    dropped = #oldest
  elseif live < #oldest then
    redis.call('ZREM', KEYS[6], oldest[redis.call('EXISTS', names[1]) == 0 and 1 or 2])
    dropped = 1
  end
end
redis.call('ZADD', KEYS[6], seq, ARGV[1])
if renew or dropped == #oldest then  -- (renewed, or perhaps a new key)
  redis.call('PEXPIRE', KEYS[6], left)
end
if renew then redis.call('PEXPIRE', KEYS[3], left) end
local notice = notice_of(ARGV[5], ARGV[3], tonumber(ARGV[6]), seq, '\192')
redis.call(PUBLISH, session .. 'events', notice)
if INDEXED then
  redis.call('ZADD', KEYS[7], 0, ARGV[8])
  redis.call(PUBLISH, KEYS[7] .. ':events', notice)
end
return {1, seq}
