-- KEYS: history.  ARGV: the session's key prefix ('qb:{sid}:'), the highest score to take
-- ('+inf', or '(' .. a score: below it), how many to return.
-- Returns up to that many {id, score, how many events, the events packed one after the other,
-- first and latest event of the list}, newest first (false: none). The events are a field
-- of the questionnaire's hash (e, with n; compare_and_set.lua); a list holds those an older
-- broker wrote (it kept them there), which the caller puts in order by their time. Entries
-- whose questionnaire expired leave the history on the way.
local found, max, count = {}, ARGV[2], tonumber(ARGV[3])
while #found < count do
  local batch = redis.call('ZREVRANGEBYSCORE', KEYS[1], max, '-inf', 'WITHSCORES', 'LIMIT', 0, count - #found)
  if #batch == 0 then break end
  for i = 1, #batch, 2 do
    local id, score = batch[i], batch[i + 1]
    local questionnaire, listed = ARGV[1] .. 'q:' .. id, ARGV[1] .. 'ev:' .. id
    local kept = redis.call('HMGET', questionnaire, 'n', 'e')
    local listed_first = redis.call('LINDEX', listed, 0)
    local listed_last = listed_first and redis.call('LINDEX', listed, -1)
    if (kept[1] and kept[1] ~= '0') or listed_first then
      found[#found + 1] = {id, score, kept[1] or '0', kept[2] or '', listed_first, listed_last}
    elseif not kept[1] and redis.call('EXISTS', questionnaire) == 0 then
      redis.call('ZREM', KEYS[1], id)
    end
    max = '(' .. score
  end
end
return found
