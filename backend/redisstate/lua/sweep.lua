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

-- Events go oldest first while there are too many or they are too old.
local n = redis.call('XLEN', HIST)
local removed, last = 0, nil
local from, count = '-', 1 -- one event first: usually there is nothing to do
while removed < n do
  local es = redis.call('XRANGE', HIST, from, '+', 'COUNT', count)
  count = 100
  if #es == 0 then break end
  local stop = false
  for _, e in ipairs(es) do
    local k, t = unev(e[2][2])
    local drop = (maxEvents > 0 and n - removed > maxEvents) or (maxAge > 0 and t < now - maxAge)
    if not drop then
      stop = true
      break
    end
    if removed == elimit then
      more, stop = 1, true
      break
    end
    local id = evid(e[1])
    redis.call('ZREM', hk(k), id)
    removed, last = removed + 1, id
  end
  if stop then break end
  from = '(' .. es[#es][1]
end
if last then redis.call('XTRIM', HIST, 'MINID', I(tonumber(last) + 1) .. '-0') end
return {records, removed, more}
