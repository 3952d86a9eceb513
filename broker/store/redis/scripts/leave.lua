-- KEYS: clients, seen.  ARGV: client id, now, lifetime ms
-- Returns the live clients after it left, or -1 when it was not connected.
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
  return redis.call('ZCOUNT', KEYS[1], '(' .. ARGV[2], '+inf')
end
return -1
