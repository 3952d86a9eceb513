-- The revocation list, when its version is not the one the caller has.
-- KEYS[1] the revocations (hash), KEYS[2] the list's version; ARGV[1] the version known.
-- Returns {version} when unchanged, else {version, {field, value, ...}}.
local version = redis.call('GET', KEYS[2]) or ''
if version == ARGV[1] then
  return {version}
end
return {version, redis.call('HGETALL', KEYS[1])}
