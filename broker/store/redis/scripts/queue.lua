-- KEYS: queue, seq.  ARGV: questionnaire key prefix, '1' to return {seq, the head's record}
-- ({seq}: no open questionnaire) instead of the ids.
-- Ids whose questionnaire expired while still open leave the queue on the way.
local live = {}
local seq = tonumber(redis.call('GET', KEYS[2]) or '0')
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local record = redis.call('HGET', ARGV[1] .. id, 's')
  if not record then
    redis.call('ZREM', KEYS[1], id)
  elseif ARGV[2] == '1' then
    return {seq, record}
  else
    table.insert(live, id)
  end
end
if ARGV[2] == '1' then return {seq} end
return live
