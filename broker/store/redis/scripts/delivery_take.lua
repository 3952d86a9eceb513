-- KEYS: the deliveries stream.  ARGV: group, consumer, count, idle (ms).
-- Returns {id, record, id, record, ...}: first the deliveries another consumer held and left
-- alone for ``idle`` (it stopped: now this consumer's), then new ones, ``count`` at most.
redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
local taken = {}
local count = tonumber(ARGV[3])
local function keep(entries)
  for _, entry in ipairs(entries) do
    local fields = entry[2]
    if fields then  -- (nil: deleted meanwhile)
      for i = 1, #fields, 2 do
        if fields[i] == 'd' then
          taken[#taken + 1] = entry[1]
          taken[#taken + 1] = fields[i + 1]
        end
      end
    end
  end
end
local stale = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[4], '0-0', 'COUNT', count)
keep(stale[2])
local left = count - #taken / 2
if left > 0 then
  local fresh = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', left, 'STREAMS', KEYS[1], '>')
  if fresh then
    keep(fresh[1][2])
  end
end
return taken
