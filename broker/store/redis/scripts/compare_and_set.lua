-- A write script: scripts/__init__.py puts the prelude (PUBLISH), msgpack.lua and expiry.lua
-- before it.
-- KEYS: questionnaire hash, queue, seq, inbox (an older broker's), events (an older broker's),
--       history
-- ARGV: expected version, new version, record, retention ms, '1' if terminal, id, notice prefix,
--       notice record limit, '1' if an outcome (the notice also goes to the outcomes channel),
--       the inbox entry (of an open state), the length of its prefix that says its step and
--       status (the 'moment': an entry whose moment did not change stays as it is, so a draft
--       does not move it), now (ms, the broker's clock), event... (appended to the questionnaire's)
-- Returns 0 when the version moved on; else {seq} or, for a terminal state, {seq, 1, head
-- record} ({seq, 1}: the queue is empty now); {0} for a retry that finds its own write.
--
-- The hash keeps beside the version (v) and the record (s) when its keys expire (x, ms), its
-- inbox entry (i) and its events (e: n of them, packed one after the other), so one HMGET
-- tells what else the write must touch, and one HSET writes the state, its entry and its
-- events. Its keys, and the session's, are renewed only when their expiry is due (expiry.lua).
local stored = redis.call('HMGET', KEYS[1], 'v', 'x', 'i', 'n', 'e')
if stored[1] ~= ARGV[1] then
  -- A retry finds its own write:
  if stored[1] == ARGV[2] and redis.call('HGET', KEYS[1], 's') == ARGV[3] then return {0} end
  return 0
end
local session = string.sub(KEYS[3], 1, -4)  -- 'qb:{sid}:' (the seq key without 'seq')
local seq = redis.call('INCR', KEYS[3])
local retention, now = tonumber(ARGV[4]), tonumber(ARGV[12])
local renew = renewal_due(tonumber(stored[2]), now, retention)
local fields = {'v', ARGV[2], 's', ARGV[3]}
if renew then
  fields[#fields + 1] = 'x'
  fields[#fields + 1] = string.format('%.0f', now + retention)
end
local moment = tonumber(ARGV[11])
local moved = ARGV[5] ~= '1' and ARGV[10] ~= ''  -- ('': no entry to keep)
  and (not stored[3] or string.sub(stored[3], 1, moment) ~= string.sub(ARGV[10], 1, moment))
if moved then
  fields[#fields + 1] = 'i'
  fields[#fields + 1] = ARGV[10]
elseif ARGV[5] == '1' and stored[3] then  -- (ended: out of the inbox, and its bytes with it)
  fields[#fields + 1] = 'i'
  fields[#fields + 1] = ''
end
local listed = stored[4] == false and #ARGV > 12  -- (no n: created by an older broker, events in a list)
if stored[4] and #ARGV > 12 then
  fields[#fields + 1] = 'e'
  fields[#fields + 1] = (stored[5] or '') .. table.concat(ARGV, '', 13, #ARGV)
  fields[#fields + 1] = 'n'
  fields[#fields + 1] = tonumber(stored[4]) + #ARGV - 12
end
redis.call('HSET', KEYS[1], unpack(fields))
if listed and redis.call('RPUSH', KEYS[5], unpack(ARGV, 13)) == #ARGV - 12 and not renew then
  redis.call('PEXPIRE', KEYS[5], redis.call('PTTL', KEYS[1]))  -- (its first events: a new key)
end
if renew then  -- the questionnaire's keys, and the session's that must outlive them
  for i = 1, 6 do redis.call('PEXPIRE', KEYS[i], retention) end
end
local reply = {seq}
local head = '\192'  -- nil: not said
if ARGV[5] == '1' then
  redis.call('ZREM', KEYS[2], ARGV[6])
  if not stored[3] then redis.call('HDEL', KEYS[4], ARGV[6]) end  -- (an older broker's entry)
  reply = {seq, 1}
  head = '\194'  -- false: no open questionnaire left
  while true do  -- the next head; ids whose questionnaire expired leave the queue on the way
    local first = redis.call('ZRANGE', KEYS[2], 0, 0)
    if #first == 0 then break end
    local record = redis.call('HGET', session .. 'q:' .. first[1], 's')
    if record then
      reply = {seq, 1, record}
      head = msgpack_record(record, tonumber(ARGV[8]))
      break
    end
    redis.call('ZREM', KEYS[2], first[1])
  end
end
local notice = notice_of(ARGV[7], ARGV[3], tonumber(ARGV[8]), seq, head)
redis.call(PUBLISH, session .. 'events', notice)
if ARGV[9] == '1' then
  redis.call(PUBLISH, session .. 'outcomes', notice)
end
return reply
