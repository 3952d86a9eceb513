-- KEYS: questionnaire hash, events list.  Returns {its events, oldest first; events in the
-- list}, or nil when the questionnaire is unknown or expired. The events are fields of the
-- hash (n of them: e1, e2, ...); a list holds those an older broker wrote (it kept them
-- there), which the caller puts in order by their time.
local n = redis.call('HGET', KEYS[1], 'n')
if not n and redis.call('EXISTS', KEYS[1]) == 0 then return false end
local found = {}
for first = 1, tonumber(n or 0), 1000 do  -- (a thousand fields a command: Lua's unpack has limits)
  local names = {}
  for i = first, math.min(first + 999, tonumber(n)) do names[#names + 1] = 'e' .. i end
  for _, event in ipairs(redis.call('HMGET', KEYS[1], unpack(names))) do found[#found + 1] = event end
end
return {found, redis.call('LRANGE', KEYS[2], 0, -1)}
