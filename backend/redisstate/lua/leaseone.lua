-- leaseone.lua is lease.lua for a lease call made alone (a batch of one),
-- which the driver sends here rather than to lease.lua: without lease.lua's
-- tables of a batch a lone call costs Redis less. It must decide and write
-- exactly as lease.lua does: the conformance suite, which checks both
-- against package state's portable lease code byte for byte, runs through
-- each (TestConformance, and TestConformanceBatched with every call
-- batched).
--
-- leaseone.lua acquires, renews or releases a lease in one step
-- (backend.Leaser), following exactly the rules of the portable code in
-- package state (lease.go) and writing the same record and events. The
-- lease record's writer is the holder and its create revision the fence.
-- It stands alone and spells out the record and event formats of rec.lua
-- and ev.lua: it is a hot path, and helpers cost even unused. Reads share
-- one MGET.
--
-- KEYS[1] is the namespace's base (see base.lua for the layout).
-- ARGV: now ('' for Redis's clock), action (1 acquire, 2 renew, 3
-- release), resource, holder, TTL ms, lease record key, holder as Go's
-- encoding/json writes it, and the event's writer (the holder, or the
-- holder joined with the principal it acts for: backend.LeaseQuery.Writer).
-- Reply: one string, ok and takeover as digits (0 or 1), now (struct
-- '<i8'), then the lease record packed, if any: the lease after the action
-- when ok (before it, for a release), otherwise the live lease that
-- prevented it. A string rather than a table: Redis and go-redis both
-- spend less on it.
local B = KEYS[1]
local now = ARGV[1]
if now == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
else
  now = tonumber(now)
end
local nowp = struct.pack('<i8', now)
local act, res, holder, ttl, key = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6]
local rk, REV = B .. ':r:' .. key, B .. ':rev'

-- The lease, and the counters of revisions and removed events.
local m = redis.call('MGET', rk, REV, B .. ':off')
local r = m[1]
local isLive, w, fence, x = false, nil, 0, 0
if r then
  local _, c, _, x0, wl = struct.unpack('<i8i8i8i8i4', r)
  isLive, w, fence, x = x0 == 0 or x0 > now, string.sub(r, 37, 36 + wl), c, x0
end
local mine = isLive and w == holder
-- Release and renew need the caller's live lease; acquire needs a free one.
if not mine and (act ~= '1' or isLive) then return '00' .. nowp .. (isLive and r or '') end

-- A fresh revision counter (a new namespace, or one Redis lost) starts
-- from Redis's clock in microseconds, above every revision handed out
-- before (see redisstate.go).
local rev = tonumber(m[2])
if rev then
  rev = rev + 1
else
  local t = redis.call('TIME')
  rev = t[1] * 1000000 + t[2]
end
local prev, op, takeover, value = '', 'lease.release', '0', ''
if isLive or (r and w ~= holder) then -- the lease as it was, live or taken over
  local hj = ARGV[7]
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
  redis.call('DEL', rk)
  redis.call('SET', REV, string.format('%d', rev))
  redis.call('ZREM', B .. ':idx', key)
  if x ~= 0 then redis.call('ZREM', B .. ':exp', key) end
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
  local nx = now + ttl
  local nxs = string.format('%d', nx)
  lr = struct.pack('<i8i8i8i8i4', rev, mine and fence or rev, now, nx, #holder) .. holder ..
    '{"ttl_ms":' .. ARGV[5] .. '}'
  redis.call('MSET', rk, lr, REV, string.format('%d', rev))
  if not r then redis.call('ZADD', B .. ':idx', '0', key) end
  redis.call('ZADD', B .. ':exp', nxs, key)
  value = '{"holder":' .. ARGV[7] .. string.format(',"fence":%d,"expires_at":', fence) .. nxs .. '}'
end
local n = redis.call('RPUSH', B .. ':ev',
  struct.pack('<i8i8i4i4i4i4i4', rev, now, #res, #op, #ARGV[8], #value, #prev) .. res .. op .. ARGV[8] .. value .. prev)
redis.call('RPUSH', B .. ':h:' .. res, string.format('%d', n + (tonumber(m[3]) or 0)))
redis.call('PUBLISH', B .. ':changes', '')
return '1' .. takeover .. nowp .. lr
