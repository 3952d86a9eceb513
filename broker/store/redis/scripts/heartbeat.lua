-- KEYS: clients, seen.  ARGV: client id, expiry, now, lifetime ms
-- Returns the live clients when this one arrived (new, or back after its heartbeat lapsed),
-- else -1: a change of who is connected is told to the inbox's watchers.
local before = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
if before and tonumber(before) > tonumber(ARGV[3]) then return -1 end
return redis.call('ZCOUNT', KEYS[1], '(' .. ARGV[3], '+inf')
