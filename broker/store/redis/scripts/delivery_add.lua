-- KEYS: the deliveries stream.  ARGV: group, record.  Adds the record (the group is made
-- with the stream, from its start, so no record added before it is missed).
redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
return redis.call('XADD', KEYS[1], '*', 'd', ARGV[2])
