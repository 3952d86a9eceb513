-- KEYS: clients, seen.  ARGV: now, lifetime ms.
-- Returns {live clients, last seen or false, 1 if lapsed heartbeats were dropped}; the session
-- was last seen no earlier than they lapsed.
local lapsed = redis.call('ZREVRANGEBYSCORE', KEYS[1], ARGV[1], '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
if #lapsed > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
  local seen = redis.call('GET', KEYS[2])
  if not seen or tonumber(lapsed[2]) > tonumber(seen) then
    redis.call('SET', KEYS[2], lapsed[2], 'PX', ARGV[2])
  end
end
return {redis.call('ZCARD', KEYS[1]), redis.call('GET', KEYS[2]), #lapsed > 0 and 1 or 0}
