-- history.lua reads events newest first (backend.Driver.History).
--
-- ARGV: key ('' for all), before (0 for none), limit.
-- Reply: {id, packed event, id, packed event, ...}, newest first.
local key, before, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local EV = B .. ':ev'
local off = tonumber(redis.call('GET', B .. ':off')) or 0
local n = redis.call('LLEN', EV)
local out = {}
if key == '' then
  -- The events kept have the ids off+1 .. off+n: one range of the log.
  local top = off + n
  if before > 0 and before - 1 < top then top = before - 1 end
  local bot = math.max(off + 1, top - limit + 1)
  if top < bot then return out end
  local es = redis.call('LRANGE', EV, I(bot - off - 1), I(top - off - 1))
  for i = #es, 1, -1 do
    out[#out + 1] = bot + i - 1
    out[#out + 1] = es[i]
  end
  return out
end
-- The key's ids ascend: find the last one below before by bisection.
local HK = B .. ':h:' .. key
local hi = redis.call('LLEN', HK) - 1
if before > 0 and hi >= 0 and tonumber(redis.call('LINDEX', HK, I(hi))) >= before then
  local lo, h = 0, hi - 1
  hi = -1
  while lo <= h do
    local mid = math.floor((lo + h) / 2)
    if tonumber(redis.call('LINDEX', HK, I(mid))) < before then
      hi, lo = mid, mid + 1
    else
      h = mid - 1
    end
  end
end
if hi < 0 then return out end
local ids = redis.call('LRANGE', HK, I(math.max(0, hi - limit + 1)), I(hi))
for i = #ids, 1, -1 do
  local id = tonumber(ids[i])
  if id > off and id <= off + n then
    out[#out + 1] = id
    out[#out + 1] = redis.call('LINDEX', EV, I(id - off - 1))
  end
end
return out
