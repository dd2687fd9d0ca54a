-- history.lua reads events newest first (backend.Driver.History).
--
-- ARGV: key ('' for all), before (0 for none), limit.
-- Reply: {id, packed event, id, packed event, ...}.
--
-- Events are only ever removed oldest first (Sweep) or all at once (Reset),
-- so the ids present always form the range [eid - HLEN + 1, eid].
local key, before, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local ids
if key == '' then
  local hi = tonumber(redis.call('GET', EID) or '0')
  local lo = hi - redis.call('HLEN', HIST) + 1
  if before > 0 and before - 1 < hi then hi = before - 1 end
  ids = {}
  for id = hi, math.max(lo, hi - limit + 1), -1 do ids[#ids + 1] = I(id) end
else
  local max = '+inf'
  if before > 0 then max = '(' .. I(before) end
  ids = redis.call('ZREVRANGEBYSCORE', hk(key), max, '-inf', 'LIMIT', 0, limit)
end
if #ids == 0 then return {} end
local evs = redis.call('HMGET', HIST, unpack(ids))
local out = {}
for i, id in ipairs(ids) do
  if evs[i] then
    out[#out + 1] = id
    out[#out + 1] = evs[i]
  end
end
return out
