-- commit.lua checks conditions and, only if all hold, applies writes and
-- appends events with one new revision (backend.Driver.Commit).
--
-- ARGV: now ('' for Redis's clock), #conds, #ops, #events, then
--   per cond:  key, revision
--   per op:    kind ('p' put, 'd' delete, 'a' add), key, value, writer, ttl ms, time ms
--   per event: key, op, value, prev, prevof, writer, time ms ('' for now)
-- Reply: {committed 0|1, revision, failed index, current revision, now}.
local now = clock(ARGV[1])
local nc, no, ne = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])

-- seen holds the records read or written so far, packed (false: absent),
-- so that a key is read once however many conditions, events and ops name it.
local seen = {}
local function read(k)
  local s = seen[k]
  if s == nil then
    s = rec(k)
    seen[k] = s
  end
  return s
end

local a = 5
for i = 0, nc - 1 do
  local cur = lrev(read(ARGV[a]), now)
  if cur ~= tonumber(ARGV[a + 1]) then return {0, 0, i, cur, now} end
  a = a + 2
end
if no == 0 and ne == 0 then return {1, 0, -1, 0, now} end
local rev = redis.call('INCR', B .. ':rev')
-- A fresh revision counter (a new namespace, or one Redis lost) starts
-- from Redis's clock in microseconds, above every revision handed out
-- before (see redisstate.go).
if rev == 1 then
  local t = redis.call('TIME')
  rev = t[1] * 1000000 + t[2]
  redis.call('SET', B .. ':rev', I(rev))
end
local oa = a
a = a + 6 * no
-- Events are packed first: their previous values are read before any op
-- is applied.
local evs, eks = {}, {}
for i = 1, ne do
  local k, p, pk = ARGV[a], ARGV[a + 3], ARGV[a + 4]
  if pk ~= '' then
    local s = read(pk)
    if lrev(s, now) ~= 0 then p = string.sub(s, RHL + 1 + struct.unpack('<i4', s, 33)) end
  end
  local t = now
  if ARGV[a + 6] ~= '' then t = tonumber(ARGV[a + 6]) end
  evs[i], eks[i] = evpack(k, ARGV[a + 1], ARGV[a + 2], p, ARGV[a + 5], t, rev), k
  a = a + 7
end
a = oa
for _ = 1, no do
  local k = ARGV[a + 1]
  if ARGV[a] == 'p' then
    seen[k] = put(k, ARGV[a + 2], ARGV[a + 3], tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), rev, now, read(k))
  elseif ARGV[a] == 'a' then
    -- A counter: the live record's decimal integer (else 0) plus the value.
    local s, n = read(k), 0
    if lrev(s, now) ~= 0 then n = tonumber(string.sub(s, RHL + 1 + struct.unpack('<i4', s, 33))) or 0 end
    n = n + (tonumber(ARGV[a + 2]) or 0)
    seen[k] = put(k, I(n), ARGV[a + 3], tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), rev, now, s)
  else
    del(k)
    seen[k] = false
  end
  a = a + 6
end
if ne > 0 then
  -- The log is appended to in batches (unpack has a stack limit); the ids
  -- follow from its length.
  local n
  for i = 1, ne, 1000 do n = redis.call('RPUSH', B .. ':ev', unpack(evs, i, math.min(i + 999, ne))) end
  local id = n - ne + (tonumber(redis.call('GET', B .. ':off')) or 0)
  for i = 1, ne do redis.call('RPUSH', B .. ':h:' .. eks[i], I(id + i)) end
end
redis.call('PUBLISH', B .. ':changes', '')
return {1, rev, -1, 0, now}
