-- KEYS: questionnaire hash, events.  Returns the events (oldest first), or nil when the
-- questionnaire is unknown or expired.
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
return redis.call('LRANGE', KEYS[2], 0, -1)
