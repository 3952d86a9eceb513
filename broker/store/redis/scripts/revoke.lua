-- Keep a revocation; drop those whose time is up; change the list's version.
-- KEYS[1] the revocations (hash: field -> "<at> <until>"), KEYS[2] the list's version.
-- ARGV[1] the field (j:<jti> or s:<sub>), ARGV[2] at, ARGV[3] until, ARGV[4] now,
-- ARGV[5] the new version.
local at, till, now = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local kept = redis.call('HGETALL', KEYS[1])
for i = 1, #kept, 2 do
  local kept_at, kept_until = string.match(kept[i + 1], '^(%S+) (%S+)$')
  if kept[i] == ARGV[1] then
    -- the same token or holder again: the later of each (Revocation.merged)
    at = math.max(at, tonumber(kept_at))
    till = math.max(till, tonumber(kept_until))
  elseif tonumber(kept_until) <= now then
    redis.call('HDEL', KEYS[1], kept[i])
  end
end
redis.call('HSET', KEYS[1], ARGV[1], string.format('%.17g %.17g', at, till))
redis.call('SET', KEYS[2], ARGV[5])
return 1
