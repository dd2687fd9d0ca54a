-- lease.lua acquires, renews or releases leases (backend.Leaser), one
-- after another in one step, following exactly the rules of the portable
-- code in package state (lease.go) and writing the same records and
-- events. The lease record's writer is the holder and its create revision
-- the fence. The driver sends the lease calls of one namespace that wait
-- at the same moment together (batch.go); a call made alone goes to
-- leaseone.lua, which must decide and write exactly as this script does
-- for a batch of one (the conformance suite runs through each). It stands
-- alone and spells out the record and event formats of rec.lua and ev.lua:
-- it is a hot path, and helpers cost even unused.
--
-- A batch shares what it can: one TIME, one MGET of every lease and
-- counter, one MSET of every record written (the revision counter too),
-- one ZADD per sorted set, one RPUSH of every event and one PUBLISH. What
-- a call writes is kept in a table that later calls of the batch read, so
-- that calls on one lease take effect in order; nothing is written before
-- every call has been decided, so a call that fails (a corrupt record)
-- fails the batch having written nothing, and the driver then sends each
-- call alone.
--
-- KEYS[1] is the namespace's base (see base.lua for the layout).
-- ARGV: now ('' for Redis's clock), then per call: action (1 acquire, 2
-- renew, 3 release), resource, holder, TTL ms, lease record key, holder as
-- Go's encoding/json writes it, and the event's writer (the holder, or the
-- holder joined with the principal it acts for: backend.LeaseQuery.Writer).
-- Reply: per call one string, ok and takeover as digits (0 or 1), now
-- (struct '<i8'), then the lease record packed, if any: the lease after
-- the action when ok (before it, for a release), otherwise the live lease
-- that prevented it. A string rather than a table: Redis and go-redis both
-- spend less on it.
local B = KEYS[1]
local REV = B .. ':rev'
local now = ARGV[1]
if now == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
else
  now = tonumber(now)
end
local nowp = struct.pack('<i8', now)
local n = (#ARGV - 1) / 7

-- The counters of removed events and revisions, and every lease.
local keys = {B .. ':off', REV}
for i = 1, n do keys[2 + i] = B .. ':r:' .. ARGV[7 * i - 1] end
local m = redis.call('MGET', unpack(keys))
local cur, xs, was = {}, {}, {} -- per record key: as this batch leaves it, its expiry, and at the start
for i = 3, #keys do
  local k = keys[i]
  if cur[k] == nil then
    local r = m[i]
    cur[k], was[k], xs[k] = r, {r and true, 0, ARGV[7 * (i - 2) - 1]}, 0
    if r then
      local x = struct.unpack('<i8', r, 25)
      xs[k], was[k][2] = x, x
    end
  end
end
-- A fresh revision counter (a new namespace, or one Redis lost) starts
-- from Redis's clock in microseconds, above every revision handed out
-- before (see redisstate.go).
local rev = tonumber(m[2])
if not rev then
  local t = redis.call('TIME')
  rev = t[1] * 1000000 + t[2] - 1
end

local order, touched, evs, hks = {}, {}, {}, {}
local function lease(rk, act, res, holder, ttls, hj0, writer)
  local r = cur[rk]
  local isLive, w, fence, x = false, nil, 0, 0
  if r then
    local _, c, _, x0, wl = struct.unpack('<i8i8i8i8i4', r)
    isLive, w, fence, x = x0 == 0 or x0 > now, string.sub(r, 37, 36 + wl), c, x0
  end
  local mine = isLive and w == holder
  -- Release and renew need the caller's live lease; acquire needs a free one.
  if not mine and (act ~= '1' or isLive) then return '00' .. nowp .. (isLive and r or '') end

  rev = rev + 1
  local prev, op, takeover, value = '', 'lease.release', '0', ''
  if isLive or (r and w ~= holder) then -- the lease as it was, live or taken over
    local hj = hj0
    if w ~= holder then -- a former holder, encoded as Go's encoding/json would
      hj = w
      if string.find(hj, '[%z\1-\31"\\<>&\226]') then
        local esc = {['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t',
          ['\b'] = '\\b', ['\f'] = '\\f', ['<'] = '\\u003c', ['>'] = '\\u003e', ['&'] = '\\u0026'}
        hj = string.gsub(hj, '[%z\1-\31"\\<>&]', function(c) return esc[c] or string.format('\\u%04x', string.byte(c)) end)
        hj = string.gsub(hj, '\226\128\168', '\\u2028')
        hj = string.gsub(hj, '\226\128\169', '\\u2029')
      end
      hj = '"' .. hj .. '"'
    end
    prev = '{"holder":' .. hj .. string.format(',"fence":%d,"expires_at":%d}', fence, x)
  end
  local lr = r
  if act == '3' then
    cur[rk], xs[rk] = false, 0
  else
    -- A new tenure's fence is this write's revision; like package state, its
    -- event leaves the fence 0 for history to fill in.
    op = 'lease.acquire'
    if mine then
      if act == '2' then op = 'lease.renew' end
    else
      if r and w ~= holder then op, takeover = 'lease.takeover', '1' end
      fence = 0
    end
    local nx = now + tonumber(ttls)
    lr = struct.pack('<i8i8i8i8i4', rev, mine and fence or rev, now, nx, #holder) .. holder ..
      '{"ttl_ms":' .. ttls .. '}'
    cur[rk], xs[rk] = lr, nx
    value = '{"holder":' .. hj0 .. string.format(',"fence":%d,"expires_at":%d}', fence, nx)
  end
  if not touched[rk] then touched[rk] = true; order[#order + 1] = rk end
  evs[#evs + 1] = struct.pack('<i8i8i4i4i4i4i4', rev, now, #res, #op, #writer, #value, #prev) .. res .. op .. writer .. value .. prev
  hks[#hks + 1] = B .. ':h:' .. res
  return '1' .. takeover .. nowp .. lr
end

local out = {}
for i = 1, n do
  local a = 7 * i - 5
  out[i] = lease(keys[2 + i], ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 5], ARGV[a + 6])
end
if #evs == 0 then return out end

-- The records as the batch leaves them, with the sorted sets of keys
-- (idx) and of expiries (exp).
local set, del, zexp, zrexp, zidx, zridx = {REV, string.format('%d', rev)}, {}, {}, {}, {}, {}
for _, rk in ipairs(order) do
  local w0, key = was[rk], was[rk][3]
  if cur[rk] then
    set[#set + 1] = rk
    set[#set + 1] = cur[rk]
    zexp[#zexp + 1] = string.format('%d', xs[rk])
    zexp[#zexp + 1] = key
    if not w0[1] then
      zidx[#zidx + 1] = '0'
      zidx[#zidx + 1] = key
    end
  else
    if w0[1] then
      del[#del + 1] = rk
      zridx[#zridx + 1] = key
      if w0[2] ~= 0 then zrexp[#zrexp + 1] = key end
    end
  end
end
redis.call('MSET', unpack(set))
if #del > 0 then redis.call('DEL', unpack(del)) end
if #zexp > 0 then redis.call('ZADD', B .. ':exp', unpack(zexp)) end
if #zrexp > 0 then redis.call('ZREM', B .. ':exp', unpack(zrexp)) end
if #zidx > 0 then redis.call('ZADD', B .. ':idx', unpack(zidx)) end
if #zridx > 0 then redis.call('ZREM', B .. ':idx', unpack(zridx)) end
local id0 = redis.call('RPUSH', B .. ':ev', unpack(evs)) - #evs + (tonumber(m[1]) or 0)
for j, hk in ipairs(hks) do redis.call('RPUSH', hk, string.format('%d', id0 + j)) end
redis.call('PUBLISH', B .. ':changes', '')
return out
