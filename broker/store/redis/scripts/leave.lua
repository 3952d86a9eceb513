-- KEYS: clients, seen.  ARGV: client id, now, lifetime ms
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
end
