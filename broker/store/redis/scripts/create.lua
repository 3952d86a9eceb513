-- A write script: scripts/__init__.py puts the prelude (PUBLISH, INDEXED, ONE_KEY),
-- msgpack.lua, expiry.lua and write_keys.lua before it.
-- KEYS: the write's keys (write_keys.lua)[, the inbox index shard when INDEXED][, idempotency key]
-- ARGV: 'version, retention ms, notice record limit, now' (one string, space separated: one
--       argument to pack, not four; now: ms, the broker's clock), the record, the notice
--       prefix, the inbox entry, event...
-- Returns {1, seq} when stored, {0, record} when the idempotency key names a live questionnaire.
-- INDEXED (one Redis, where a script may reach the shard's key): the session joins its inbox
-- index shard and the notice goes on the shard's channel too, in the same step; on a cluster
-- the store does both after the script (store.py).
local version, retention, limit, now = string.match(ARGV[1], '^(%d+) (%d+) (%d+) (%d+)$')
if not version then return redis.error_reply('ERR qbroker create: malformed numbers') end
retention, limit, now = tonumber(retention), tonumber(limit), tonumber(now)
local record = ARGV[2]
local session, id, K, passed = write_keys()
local queue, seq_key, history = K[2], K[3], K[6]
local shard = INDEXED and KEYS[passed + 1]
local idempotency = KEYS[passed + (INDEXED and 2 or 1)]
if idempotency then
  local known = redis.call('SET', idempotency, id, 'NX', 'GET', 'PX', retention)
  if known then
    local stored = redis.call('HGET', session .. 'q:' .. known, 's')
    if stored then return {0, stored} end
    redis.call('SET', idempotency, id, 'PX', retention)  -- (its questionnaire expired)
  end
end
local seq = redis.call('INCR', seq_key)
-- The questionnaire expires with the session's keys (they must outlive it): renewed with
-- them when their expiry is due (expiry.lua), else as they are.
local left = redis.call('PTTL', seq_key)
local renew = renewal_due(left >= 0 and now + left or nil, now, retention)
if renew then left = retention end
-- Its inbox entry (i) and its events (e: n of them, packed one after the other) are fields
-- of the hash (compare_and_set.lua), written with it (a create run again, its first reply
-- lost, writes the same ones again).
redis.call('HSET', K[1], 'v', version, 's', record, 'x', string.format('%.0f', now + left), 'i', ARGV[4],
  'n', #ARGV - 4, 'e', table.concat(ARGV, '', 5, #ARGV))
redis.call('PEXPIRE', K[1], left)
redis.call('ZADD', queue, 'NX', seq, id)
redis.call('PEXPIRE', queue, left)  -- (the queue may be new: emptied, it went)
-- The history, scored by the write number (newest last); of its two oldest entries, those
-- whose questionnaire expired leave it on the way (it shrinks under a steady load, and one
-- long-lived questionnaire at its head does not hold the others back).
local oldest = redis.call('ZRANGE', history, 0, 1)
local dropped = 0
if #oldest > 0 then  -- (one EXISTS of both; when one of two is gone, one more says which)
  local names = {}
  for i, old in ipairs(oldest) do names[i] = session .. 'q:' .. old end
  local live = redis.call('EXISTS', unpack(names))
  if live == 0 then
    redis.call('ZREM', history, unpack(oldest))
    dropped = #oldest
  elseif live < #oldest then
    redis.call('ZREM', history, oldest[redis.call('EXISTS', names[1]) == 0 and 1 or 2])
    dropped = 1
  end
end
redis.call('ZADD', history, seq, id)
if renew or dropped == #oldest then  -- (renewed, or perhaps a new key)
  redis.call('PEXPIRE', history, left)
end
if renew then redis.call('PEXPIRE', seq_key, left) end
local notice = notice_of(ARGV[3], record, limit, seq, '\192')
redis.call(PUBLISH, session .. 'events', notice)
if INDEXED then
  redis.call('ZADD', shard, 0, string.sub(session, 5, -3))  -- (the session id)
  redis.call(PUBLISH, shard .. ':events', notice)
end
return {1, seq}
