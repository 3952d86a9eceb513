-- KEYS: the deliveries stream.  ARGV: group, id.  Delivered or given up: gone for good.
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
return redis.call('XDEL', KEYS[1], ARGV[2])
