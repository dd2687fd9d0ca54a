-- get.lua reads records for backend.Driver.Get with a zero now: the Gets
-- of one namespace that wait at the same moment go in one call (batch.go),
-- and a Get made alone is a batch of one. It is kept apart from the other
-- scripts' helpers: it is the hottest read, and Go decodes each record and
-- does the arithmetic.
--
-- KEYS[1] is the namespace's base; ARGV '' (the zero now, which every
-- batched script takes first), then the keys of the records.
-- Reply: per key, the packed record alone when it never expires (no clock
-- needed), false when it is absent, otherwise {packed record, TIME
-- seconds, TIME microseconds} so that Go judges its expiry by Redis's
-- clock, read once for the batch.
local B = KEYS[1] .. ':r:'
if #ARGV == 2 then -- one Get: the commonest batch, with the fewest calls
  local s = redis.call('GET', B .. ARGV[2])
  if s and struct.unpack('<i8', s, 25) ~= 0 then
    local t = redis.call('TIME')
    s = {s, t[1], t[2]}
  end
  return {s}
end
local ks = {}
for i = 2, #ARGV do ks[i - 1] = B .. ARGV[i] end
local m = redis.call('MGET', unpack(ks))
local t
for i = 1, #ks do
  local s = m[i]
  if s and struct.unpack('<i8', s, 25) ~= 0 then
    t = t or redis.call('TIME')
    m[i] = {s, t[1], t[2]}
  end
end
return m
