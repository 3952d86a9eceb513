-- A write script: scripts/__init__.py puts the prelude (PUBLISH) and msgpack.lua before it.
-- KEYS: an inbox index shard.  ARGV: session id, message for the shard's channel ('': none).
-- The session joins the index; the message (a created questionnaire's notice) goes out.
redis.call('ZADD', KEYS[1], 0, ARGV[1])
if ARGV[2] ~= '' then
  redis.call(PUBLISH, KEYS[1] .. ':events', ARGV[2])
end
return 1
