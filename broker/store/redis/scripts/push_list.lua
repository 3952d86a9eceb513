-- KEYS: the subscriptions hash of every scope that covers one session (all on one slot).
-- Returns every packed subscription they hold (the caller drops the expired ones).
local found = {}
for _, key in ipairs(KEYS) do
  for _, packed in ipairs(redis.call('HVALS', key)) do found[#found + 1] = packed end
end
return found
