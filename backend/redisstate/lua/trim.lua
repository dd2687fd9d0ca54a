-- trim.lua removes the oldest events of the namespace beyond a count, at
-- most a given number (backend.HistoryTrimmer). The oldest event of a key
-- is the head of its list of ids, so each removal costs O(1).
--
-- ARGV: events to keep, most to remove.
-- Reply: {events removed, more 0|1}.
local keep, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local EV = B .. ':ev'
local over = redis.call('LLEN', EV) - keep
if over <= 0 then return {0, 0} end
local n = math.min(over, limit)
local off = tonumber(redis.call('GET', B .. ':off')) or 0
local es = redis.call('LRANGE', EV, '0', I(n - 1))
for i, e in ipairs(es) do
  redis.call('LREM', B .. ':h:' .. unev(e), '1', I(off + i))
end
redis.call('LTRIM', EV, I(n), '-1')
redis.call('INCRBY', B .. ':off', I(n))
if over > n then return {n, 1} end
return {n, 0}
