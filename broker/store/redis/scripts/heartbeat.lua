-- KEYS: clients, seen.  ARGV: client id, expiry, now, lifetime ms
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
