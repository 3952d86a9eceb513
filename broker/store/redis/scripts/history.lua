-- KEYS: history.  ARGV: the session's key prefix ('qb:{sid}:'), the highest score to take
-- ('+inf', or '(' .. a score: below it), how many to return.
-- Returns up to that many {id, score, first event, latest event}, newest first. Entries
-- whose questionnaire expired leave the history on the way.
local found, max, count = {}, ARGV[2], tonumber(ARGV[3])
while #found < count do
  local batch = redis.call('ZREVRANGEBYSCORE', KEYS[1], max, '-inf', 'WITHSCORES', 'LIMIT', 0, count - #found)
  if #batch == 0 then break end
  for i = 1, #batch, 2 do
    local id, score = batch[i], batch[i + 1]
    local events = ARGV[1] .. 'ev:' .. id
    local first = redis.call('LINDEX', events, 0)
    if first then
      found[#found + 1] = {id, score, first, redis.call('LINDEX', events, -1)}
    elseif redis.call('EXISTS', ARGV[1] .. 'q:' .. id) == 0 then
      redis.call('ZREM', KEYS[1], id)
    end
    max = '(' .. score
  end
end
return found
