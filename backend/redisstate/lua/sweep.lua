-- sweep.lua removes, in one namespace, records expired for longer than the
-- grace period and events beyond the retention limits, oldest first, at
-- most a given number of each (backend.Sweeper).
--
-- ARGV: now ('' for Redis's clock), grace ms, record limit, event limit,
-- max event age ms (0: none), max events (0: none).
-- Reply: {records removed, events removed, more 0|1}.
local now = clock(ARGV[1])
local grace, rlimit, elimit = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local maxAge, maxEvents = tonumber(ARGV[5]), tonumber(ARGV[6])
local more = 0
local dead = redis.call('ZRANGEBYSCORE', EXP, '-inf', I(now - grace), 'LIMIT', 0, rlimit + 1)
local records = math.min(#dead, rlimit)
for i = 1, records do
  redis.call('DEL', rk(dead[i]))
  redis.call('ZREM', IDX, dead[i])
  redis.call('ZREM', EXP, dead[i])
end
if #dead > rlimit then more = 1 end

local n = redis.call('HLEN', HIST)
local lo = tonumber(redis.call('GET', EID) or '0') - n + 1
local removed = 0
while removed < n do
  local id = I(lo + removed)
  local s = redis.call('HGET', HIST, id)
  local drop = maxEvents > 0 and n - removed > maxEvents
  if s and not drop and maxAge > 0 then
    local _, t = unev(s)
    drop = t < now - maxAge
  end
  if not drop then break end
  if removed == elimit then
    more = 1
    break
  end
  if s then dropev(id, s) end
  removed = removed + 1
end
return {records, removed, more}
