-- commit.lua checks conditions and, only if all hold, applies writes and
-- appends events with one new revision (backend.Driver.Commit).
--
-- ARGV: now ('' for Redis's clock), #conds, #ops, #events, then
--   per cond:  key, revision
--   per op:    kind ('p' put, 'd' delete), key, value, writer, ttl ms, time ms
--   per event: key, op, value, prev, prevof, writer, time ms ('' for now)
-- Reply: {committed 0|1, revision, failed index, current revision, now}.
local now = clock(ARGV[1])
local nc, no, ne = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])

-- seen holds the {r, c, x} of the records read before any write, so that
-- a key is read once however many conditions, events and ops name it.
local seen = {}
local function read(k)
  local m = seen[k]
  if not m then
    m = redis.call('HMGET', rk(k), 'r', 'c', 'x')
    seen[k] = m
  end
  return m
end

local a = 5
for i = 0, nc - 1 do
  local m = read(ARGV[a])
  local cur = 0
  if m[1] and live(m[3], now) then cur = tonumber(m[1]) end
  if cur ~= tonumber(ARGV[a + 1]) then return {0, 0, i, cur, now} end
  a = a + 2
end
if no == 0 and ne == 0 then return {1, 0, -1, 0, now} end
local rev = redis.call('INCR', REV)
local oa = a
a = a + 6 * no
-- Previous values are read before any op is applied.
local evs = {}
for i = 1, ne do
  local p, pk = ARGV[a + 3], ARGV[a + 4]
  if pk ~= '' then
    local m = seen[pk]
    if not m then
      local f = redis.call('HMGET', rk(pk), 'r', 'c', 'x', 'v')
      m = {f[1], f[2], f[3]}
      seen[pk] = m
      if m[1] and live(m[3], now) then p = f[4] end
    elseif m[1] and live(m[3], now) then
      p = redis.call('HGET', rk(pk), 'v')
    end
  end
  local t = now
  if ARGV[a + 6] ~= '' then t = tonumber(ARGV[a + 6]) end
  evs[i] = {ARGV[a], ARGV[a + 1], ARGV[a + 2], p, ARGV[a + 5], t}
  a = a + 7
end
a = oa
for i = 1, no do
  local k = ARGV[a + 1]
  if ARGV[a] == 'p' then
    put(k, ARGV[a + 2], ARGV[a + 3], tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), rev, now, seen[k])
  else
    del(k)
  end
  seen[k] = nil -- written: read it again if an op names it again
  a = a + 6
end
for i = 1, ne do
  local e = evs[i]
  ev(e[1], e[2], e[3], e[4], e[5], e[6], rev)
end
return {1, rev, -1, 0, now}
