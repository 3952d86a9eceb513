-- KEYS: questionnaire hash, events list.  Returns {how many events, the events packed one
-- after the other (oldest first), events in the list...}, or nil when the questionnaire is
-- unknown or expired. The events are a field of the hash (e, with n); a list holds those an
-- older broker wrote (it kept them there), which the caller puts in order by their time.
local kept = redis.call('HMGET', KEYS[1], 'n', 'e')
if not kept[1] and redis.call('EXISTS', KEYS[1]) == 0 then return false end
local reply = redis.call('LRANGE', KEYS[2], 0, -1)
table.insert(reply, 1, kept[2] or '')
table.insert(reply, 1, kept[1] or '0')
return reply
