-- set.lua is the fast path of backend.Driver.Commit for its commonest
-- shape, package state's Set: one put and one history event of it whose
-- previous value is the record's, optionally under a condition on the same
-- key. It writes what commit.lua would, and stands alone (no base.lua):
-- the hottest write pays for no helper it does not use.
--
-- KEYS[1] is the namespace's base (see base.lua for the layout).
-- ARGV: now ('' for Redis's clock), record key, value, writer, ttl ms,
-- time ms, required revision ('' for none), event key, event op.
-- Reply: struct.pack('<i8i8', revision, now) when committed, otherwise
-- {current revision, now}.
local B = KEYS[1]
local now = ARGV[1]
if now == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
else
  now = tonumber(now)
end
local k, v, w, ttl = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local rk = B .. ':r:' .. k
local old = redis.call('GET', rk)
local cur, c, ox, p = 0, 0, 0, ''
if old then
  local r, oc, _, x, wl = struct.unpack('<i8i8i8i8i4', old)
  ox = x
  if x == 0 or x > now then cur, c, p = r, oc, string.sub(old, 37 + wl) end
end
if ARGV[7] ~= '' and cur ~= tonumber(ARGV[7]) then return {cur, now} end
local rev = redis.call('INCR', B .. ':rev')
-- A fresh revision counter (a new namespace, or one Redis lost) starts
-- from Redis's clock in microseconds, above every revision handed out
-- before (see redisstate.go).
if rev == 1 then
  local t = redis.call('TIME')
  rev = t[1] * 1000000 + t[2]
  redis.call('SET', B .. ':rev', string.format('%d', rev))
end
if cur == 0 then c = rev end
local x = 0
if ttl > 0 then
  x = now + ttl
  redis.call('ZADD', B .. ':exp', string.format('%d', x), k)
elseif ox ~= 0 then
  redis.call('ZREM', B .. ':exp', k)
end
if not old then redis.call('ZADD', B .. ':idx', '0', k) end
redis.call('SET', rk, struct.pack('<i8i8i8i8i4', rev, c, tonumber(ARGV[6]), x, #w) .. w .. v)
local ek, op = ARGV[8], ARGV[9]
local n = redis.call('RPUSH', B .. ':ev',
  struct.pack('<i8i8i4i4i4i4i4', rev, now, #ek, #op, #w, #v, #p) .. ek .. op .. w .. v .. p)
redis.call('RPUSH', B .. ':h:' .. ek, string.format('%d', n + (tonumber(redis.call('GET', B .. ':off')) or 0)))
redis.call('PUBLISH', B .. ':changes', '')
return struct.pack('<i8i8', rev, now)
