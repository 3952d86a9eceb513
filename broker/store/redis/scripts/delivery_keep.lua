-- KEYS: the deliveries stream.  ARGV: group, consumer, id...  Marks the deliveries this
-- consumer still holds as alive (their idle time starts again); one another consumer took
-- over meanwhile stays with it.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local kept = 0
for i = 3, #ARGV do
  local pending = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1, ARGV[2])
  if #pending == 1 then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
    kept = kept + 1
  end
end
return kept
