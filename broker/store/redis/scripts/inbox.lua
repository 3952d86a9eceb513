-- KEYS: queue, clients, seq, inbox (an older broker's).  ARGV: questionnaire key prefix, now.
-- Returns {seq, connected clients, entry...}: the inbox entries of the session's open
-- questionnaires (the queue's), each a field of its questionnaire's hash (i; an older
-- broker's in the inbox hash), without those whose questionnaire expired while open (they
-- leave the queue on the way).
local reply = {tonumber(redis.call('GET', KEYS[3]) or '0'), redis.call('ZCOUNT', KEYS[2], '(' .. ARGV[2], '+inf')}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local entry = redis.call('HGET', ARGV[1] .. id, 'i')
  if not entry then
    if redis.call('EXISTS', ARGV[1] .. id) == 0 then
      redis.call('ZREM', KEYS[1], id)
    else
      entry = redis.call('HGET', KEYS[4], id)
    end
  end
  if entry and entry ~= '' then table.insert(reply, entry) end
end
return reply
