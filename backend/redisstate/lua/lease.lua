-- lease.lua acquires, renews or releases a lease in one step
-- (backend.Leaser), following exactly the rules of the portable code in
-- package state (lease.go) and writing the same record and events. The
-- lease record's writer is the holder and its create revision the fence.
--
-- ARGV: now ('' for Redis's clock), action (1 acquire, 2 renew, 3
-- release), resource, holder, TTL ms, lease record key.
-- Reply: {ok 0|1, now, takeover 0|1, lease fields v w r c t x}: the lease
-- after the action when ok (before it, for a release), otherwise the live
-- lease that prevented it, if any.

-- lev encodes a lease for history (layout.LeaseEventOf).
local function lev(holder, fence, x)
  return '{"holder":' .. jstr(holder) .. ',"fence":' .. I(fence) .. ',"expires_at":' .. I(x) .. '}'
end

local now = clock(ARGV[1])
local act, res, holder, ttl, key = tonumber(ARGV[2]), ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6]
local NONE = {false, false, false, false, false, false}

local r = rec(key)
local isLive = r and live(r[6], now)
local mine = isLive and r[2] == holder
if not mine then
  -- Release and renew need the caller's live lease; acquire needs a free one.
  if act ~= 1 or isLive then
    if isLive then return append({0, now, 0}, r) end
    return append({0, now, 0}, NONE)
  end
end

local rev = redis.call('INCR', REV)
local prev = ''
if isLive then prev = lev(r[2], tonumber(r[4]), tonumber(r[6])) end
if act == 3 then
  del(key)
  ev(res, 'lease.release', '', prev, holder, now, rev)
  return append({1, now, 0}, r)
end

local op, fence, takeover = 'lease.acquire', 0, 0
if mine then
  fence = tonumber(r[4])
  if act == 2 then op = 'lease.renew' end
elseif r and r[2] ~= holder then -- free after another holder's lease expired
  op, takeover = 'lease.takeover', 1
  prev = lev(r[2], tonumber(r[4]), tonumber(r[6]))
end
-- A new tenure's fence is this write's revision; like package state, its
-- event leaves the fence 0 for history to fill in.
local lr = put(key, '{"ttl_ms":' .. I(ttl) .. '}', holder, ttl, now, rev, now, meta(r))
ev(res, op, lev(holder, fence, now + ttl), prev, holder, now, rev)
return append({1, now, takeover}, lr)
