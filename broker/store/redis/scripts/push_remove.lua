-- KEYS: subscriptions (hash), expiries (zset) of one scope.  ARGV: id.  Returns 1 if it was there.
redis.call('ZREM', KEYS[2], ARGV[1])
return redis.call('HDEL', KEYS[1], ARGV[1])
