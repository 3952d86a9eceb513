-- KEYS: inbox, clients, seq.  ARGV: questionnaire key prefix, now.
-- Returns {seq, connected clients, entry...}: the session's inbox entries, without those
-- whose questionnaire expired while open (they leave the inbox hash on the way).
local reply = {tonumber(redis.call('GET', KEYS[3]) or '0'), redis.call('ZCOUNT', KEYS[2], '(' .. ARGV[2], '+inf')}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if redis.call('EXISTS', ARGV[1] .. all[i]) == 1 then
    table.insert(reply, all[i + 1])
  else
    redis.call('HDEL', KEYS[1], all[i])
  end
end
return reply
