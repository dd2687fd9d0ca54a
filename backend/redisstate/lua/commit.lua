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
local a = 5
for i = 0, nc - 1 do
  local f = redis.call('HMGET', rk(ARGV[a]), 'r', 'x')
  local cur = 0
  if f[1] and live(f[2], now) then cur = tonumber(f[1]) end
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
  local p = ARGV[a + 3]
  if ARGV[a + 4] ~= '' then
    local f = redis.call('HMGET', rk(ARGV[a + 4]), 'v', 'r', 'x')
    if f[2] and live(f[3], now) then p = f[1] end
  end
  local t = now
  if ARGV[a + 6] ~= '' then t = tonumber(ARGV[a + 6]) end
  evs[i] = {ARGV[a], ARGV[a + 1], ARGV[a + 2], p, ARGV[a + 5], t}
  a = a + 7
end
a = oa
for i = 1, no do
  if ARGV[a] == 'p' then
    put(ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), rev, now)
  else
    del(ARGV[a + 1])
  end
  a = a + 6
end
for i = 1, ne do
  local e = evs[i]
  ev(e[1], e[2], e[3], e[4], e[5], e[6], rev)
end
return {1, rev, -1, 0, now}
