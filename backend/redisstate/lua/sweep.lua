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
local IDX, EXP, EV = B .. ':idx', B .. ':exp', B .. ':ev'
local more = 0
local dead = redis.call('ZRANGEBYSCORE', EXP, '-inf', I(now - grace), 'LIMIT', '0', I(rlimit + 1))
local records = math.min(#dead, rlimit)
for i = 1, records do
  redis.call('DEL', B .. ':r:' .. dead[i])
  redis.call('ZREM', IDX, dead[i])
  redis.call('ZREM', EXP, dead[i])
end
if #dead > rlimit then more = 1 end

-- Events go oldest first while there are too many or they are too old. The
-- oldest event of a key is the head of its list of ids.
local n = redis.call('LLEN', EV)
local off = tonumber(redis.call('GET', B .. ':off')) or 0
local removed, from, count = 0, 0, 1 -- one event first: usually there is nothing to do
while removed < n do
  local es = redis.call('LRANGE', EV, I(from), I(from + count - 1))
  count = 100
  if #es == 0 then break end
  local stop = false
  for _, e in ipairs(es) do
    local k, t = unev(e)
    local drop = (maxEvents > 0 and n - removed > maxEvents) or (maxAge > 0 and t < now - maxAge)
    if not drop then
      stop = true
      break
    end
    if removed == elimit then
      more, stop = 1, true
      break
    end
    redis.call('LREM', B .. ':h:' .. k, '1', I(off + removed + 1))
    removed = removed + 1
  end
  if stop then break end
  from = from + #es
end
if removed > 0 then
  redis.call('LTRIM', EV, I(removed), '-1')
  redis.call('INCRBY', B .. ':off', I(removed))
end
return {records, removed, more}
