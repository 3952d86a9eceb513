-- KEYS: subscriptions (hash), expiries (zset) of one scope.
-- ARGV: id, packed subscription, expires (s), now (s), limit, key lifetime ms.
-- Keeps the subscription, drops the expired ones and, over the limit, the others due first.
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[4])
local over = redis.call('ZCARD', KEYS[2]) - #gone - tonumber(ARGV[5])
if over > 0 then
  local due = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[4], '+inf', 'LIMIT', 0, over + 1)
  for _, id in ipairs(due) do
    if id ~= ARGV[1] and over > 0 then gone[#gone + 1] = id; over = over - 1 end
  end
end
if #gone > 0 then
  redis.call('HDEL', KEYS[1], unpack(gone))
  redis.call('ZREM', KEYS[2], unpack(gone))
end
-- The keys live as long as their longest-lived subscription (-1, -2: no TTL, no key).
local lifetime = tonumber(ARGV[6])
if redis.call('PTTL', KEYS[1]) < lifetime then
  redis.call('PEXPIRE', KEYS[1], lifetime)
  redis.call('PEXPIRE', KEYS[2], lifetime)
end
return #gone
