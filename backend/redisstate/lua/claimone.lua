-- claimone.lua is claim.lua for a claim made alone (a batch of one), which
-- the driver sends here rather than to claim.lua: without claim.lua's tables
-- of a batch (what each claim wrote, the counters to pack at the end) a
-- lone claim costs Redis about a quarter less. It must decide and write
-- exactly as claim.lua does: the conformance suite, which checks both
-- against package state's portable claim byte for byte, runs through each
-- (TestConformance, and TestConformanceBatched with every call batched).
--
-- claimone.lua claims a workflow run in one step (backend.Claimer), following
-- exactly the rules of the portable code in package state (claim.go) and
-- writing the same records and events: the run, which holds its claim
-- (backend's layout.go), the counter of claimed runs when a created run
-- becomes claimed, and one history event. It stands alone and spells out the
-- record and event formats of rec.lua and ev.lua: it is a hot path, and
-- helpers cost even unused.
--
-- Every Lua operation costs here: a call of a library function (a
-- string.format, a struct.pack, a tonumber) takes about as long as Redis
-- takes for a whole SET, and concatenating a number (which Lua converts
-- with "%.14g") several times longer, so the script does as few as it can,
-- writing numbers with string.format. Reads share
-- one MGET and writes one MSET; the revision comes from INCR, whose integer
-- reply needs no parsing; the run's fields come out of one struct.unpack and
-- go back with one struct.pack; and the reply is one string rather than a
-- table.
--
-- KEYS[1] is the namespace's base (see base.lua for the layout).
-- ARGV: now ('' for Redis's clock), run id, the event's writer (the agent,
-- or the agent joined with the principal it acts for:
-- backend.ClaimQuery.Writer), claim TTL ms, and the agent as Go's
-- encoding/json writes it (which is all the script compares and keeps). The names of the layout's keys are
-- not arguments, which cost too, but spelled out in the script by
-- scripts.go: $RunPrefix, $ClaimedCount, $ChildCounts and $Claimed below.
-- Reply: one string, the outcome as a digit (1 not found, 2 finished, 3
-- held by another agent, 4 acquired, 5 renewed, 6 a join parent waiting
-- for its children: backend.ClaimOutcome; 0 a run stored as JSON, which
-- the script leaves to package state's portable claim: backend.ErrSkip)
-- and reclaimed (0 or 1), then for 4 and 5 the run's new record packed
-- (whose updated time is now), and for the others now (struct '<i8') and
-- the run's record packed, if any.
--
-- The run's value is packed (runs.go): its fields, status to the parent's
-- id, then the JSON of the fields no claim changes (name, tags, ...), kept
-- as it is. The agent is kept as its JSON, as the events spell it. A child
-- run (one with a parent) that becomes claimed also bumps its parent's
-- counter of claimed children, n/c/<parent escaped as backend.EscapeID
-- does>/claimed. Attempts and fences are packed only below 10^14 (runs.go).
local B = KEYS[1]
local RK, CK = B .. ':r:$RunPrefix' .. ARGV[2], B .. ':r:$ClaimedCount'
local now = ARGV[1]
if now == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
else
  now = tonumber(now)
end

-- The run, the count of removed events and the counter of claimed runs.
local m = redis.call('MGET', RK, B .. ':off', CK)
local r = m[1]
if not r then return '10' .. struct.pack('<i8', now) end
local _, rc, _, rx, rwl = struct.unpack('<i8i8i8i8i4', r)
if rx ~= 0 and rx <= now then return '10' .. struct.pack('<i8', now) end
if string.byte(r, 37 + rwl) ~= 1 then return '00' end
local RUN = '<Bi8i8i8i8i8Bc0Bc0i4c0i4c0'
local _, att, fence, upd, cx, _, st, ls, ag, par, tp = struct.unpack(RUN, r, 37 + rwl)
if st == 'done' or st == 'failed' then return '20' .. struct.pack('<i8', now) .. r end
if st == 'waiting' then return '60' .. struct.pack('<i8', now) .. r end

-- The claim is live while the run has an agent and an expiry after now.
-- The TTL stays a string: arithmetic and struct.pack take it as a number.
local id, writer, ttl, aj = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local held = ag ~= '' and cx > now
if held and ag ~= aj then return '30' .. struct.pack('<i8', now) .. r end

local ao = ''
if ag ~= '' then ao = ',"agent_id":' .. ag end
local old = '{"status":"' .. st .. '"' .. ao .. string.format(',"attempt":%d,"fence":%d,"last_step":', att, fence) .. ls .. '}'
local op, re, value, prev, nst, pk = 'workflow.heartbeat', '0', old, '', st, nil
if not held then
  -- A fresh claim, or a takeover from a holder whose claim expired.
  prev, op = old, 'workflow.claim'
  if ag ~= '' then op, re = 'workflow.reclaim', '1' end
  if st == 'created' then
    nst = 'claimed'
    if par ~= '' then
      -- One more claimed child of its parent.
      pk = B .. ':r:$ChildCounts' .. (string.gsub(par, '[^%w%-%._~]', function(ch) return string.format('%%%02X', string.byte(ch)) end)) .. '/$Claimed'
    end
  end
end

-- A fresh revision counter (a new namespace, or one Redis lost) starts
-- from Redis's clock in microseconds, above every revision handed out
-- before (see redisstate.go).
local rev = redis.call('INCR', B .. ':rev')
if rev == 1 then
  local t = redis.call('TIME')
  rev = t[1] * 1000000 + t[2]
  redis.call('SET', B .. ':rev', string.format('%d', rev))
end
local rr, tail = nil, string.sub(r, tp)
if held then
  -- A heartbeat extends the claim and changes nothing else.
  rr = struct.pack('<i8i8i8i8i4' .. RUN, rev, rc, now, 0, 0, 1, att, fence, upd, now + ttl, ttl,
    #st, st, #ls, ls, #ag, ag, #par, par) .. tail
else
  value = '{"status":"' .. nst .. '","agent_id":' .. aj ..
    string.format(',"attempt":%d,"fence":%d,"last_step":', att + 1, fence + 1) .. ls .. '}'
  rr = struct.pack('<i8i8i8i8i4' .. RUN, rev, rc, now, 0, 0, 1, att + 1, fence + 1, now, now + ttl, ttl,
    #nst, nst, #ls, ls, #aj, aj, #par, par) .. tail
end
if rx ~= 0 then redis.call('ZREM', B .. ':exp', '$RunPrefix' .. id) end
if nst == st then
  redis.call('SET', RK, rr)
else
  -- rec.lua's put of a counter record (no writer, never expires) holding
  -- one more than c, the record at counter key ck (false when absent).
  local function bump(ck, c)
    local n, cc = 1, rev
    if c then
      local _, c0, _, cx0 = struct.unpack('<i8i8i8i8', c)
      if cx0 == 0 or cx0 > now then n, cc = (tonumber(string.sub(c, 37)) or 0) + 1, c0 end
      if cx0 ~= 0 then redis.call('ZREM', B .. ':exp', string.sub(ck, #B + 4)) end
    else
      redis.call('ZADD', B .. ':idx', '0', string.sub(ck, #B + 4))
    end
    return struct.pack('<i8i8i8i8i4', rev, cc, now, 0, 0) .. string.format('%d', n)
  end
  if pk then
    redis.call('MSET', RK, rr, CK, bump(CK, m[3]), pk, bump(pk, redis.call('GET', pk)))
  else
    redis.call('MSET', RK, rr, CK, bump(CK, m[3]))
  end
end
local n = redis.call('RPUSH', B .. ':ev',
  struct.pack('<i8i8i4i4i4i4i4', rev, now, #id, #op, #writer, #value, #prev) .. id .. op .. writer .. value .. prev)
if m[2] then n = n + m[2] end
redis.call('RPUSH', B .. ':h:' .. id, string.format('%d', n))
redis.call('PUBLISH', B .. ':changes', '')
if held then return '50' .. rr end
return '4' .. re .. rr
