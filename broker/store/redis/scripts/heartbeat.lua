-- KEYS: clients, seen.  ARGV: client id, expiry, now, lifetime ms
-- Returns the live clients when this one arrived (new, or back after its heartbeat lapsed),
-- else -1: a change of who is connected is told to the inbox's watchers.
-- The clients' key is given its lifetime when a client arrives, and again when a client's
-- beat is the first of a new eighth of the lifetime (by the clock: its last beat, its score
-- less its ttl, was in an earlier one), not on every beat: while any client beats, the key
-- is renewed at least once every eighth.
local before = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
local now = tonumber(ARGV[3])
local arrived = not before or tonumber(before) <= now
local eighth = tonumber(ARGV[4]) / 8000  -- seconds
if arrived or math.floor((tonumber(before) - (tonumber(ARGV[2]) - now)) / eighth) < math.floor(now / eighth) then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
if not arrived then return -1 end
return redis.call('ZCOUNT', KEYS[1], '(' .. ARGV[3], '+inf')
