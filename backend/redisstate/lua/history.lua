-- history.lua reads events newest first (backend.Driver.History).
--
-- ARGV: key ('' for all), before (0 for none), limit.
-- Reply: {id, packed event, id, packed event, ...}.
local key, before, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {}
if key == '' then
  local max = '+'
  if before > 0 then max = '(' .. I(before) .. '-0' end
  for _, e in ipairs(redis.call('XREVRANGE', HIST, max, '-', 'COUNT', limit)) do
    out[#out + 1] = evid(e[1])
    out[#out + 1] = e[2][2]
  end
  return out
end
local max = '+inf'
if before > 0 then max = '(' .. I(before) end
for _, id in ipairs(redis.call('ZREVRANGEBYSCORE', hk(key), max, '-inf', 'LIMIT', 0, limit)) do
  local e = redis.call('XRANGE', HIST, id .. '-0', id .. '-0')
  if e[1] then
    out[#out + 1] = id
    out[#out + 1] = e[1][2][2]
  end
end
return out
