-- msgpack encoders for what a write script appends to a notice (Redis's Lua has cmsgpack,
-- but fakeredis has not): an unsigned 64-bit integer, and a bin 32. Every write script
-- starts with this file (scripts/__init__.py).
local function msgpack_uint(n)  -- a uint 64 (the write numbers stay far below 2^53)
  local hi = math.floor(n / 4294967296)
  local lo = n - hi * 4294967296
  return string.char(207, math.floor(hi / 16777216), math.floor(hi / 65536) % 256, math.floor(hi / 256) % 256,
    hi % 256, math.floor(lo / 16777216), math.floor(lo / 65536) % 256, math.floor(lo / 256) % 256, lo % 256)
end
local function msgpack_bin_head(n)  -- the head of a bin 32 of n bytes
  return string.char(198, math.floor(n / 16777216), math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
end
local function notice_of(prefix, record, limit, seq, head)  -- one string made, not one per part
  if #record > limit then  -- too large to carry: nil
    return prefix .. '\192' .. msgpack_uint(seq) .. head
  end
  return prefix .. msgpack_bin_head(#record) .. record .. msgpack_uint(seq) .. head
end
local function msgpack_record(s, limit)
  if #s > limit then return '\192' end  -- nil: too large to carry
  return msgpack_bin_head(#s) .. s
end
