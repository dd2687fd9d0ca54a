-- claim.lua claims a workflow run in one step (backend.Claimer), following
-- exactly the rules of the portable code in package state (claim.go) and
-- writing the same records and events: the run, which holds its claim
-- (internal/layout), the counter of claimed runs when a created run
-- becomes claimed, and one history event. It stands alone and spells out the
-- record and event formats of rec.lua and ev.lua: it is a hot path, and
-- helpers cost even unused.
--
-- Every Lua operation costs here: a call of a library function (a
-- string.format, a struct.pack, a tonumber) takes about as long as Redis
-- takes for a whole SET, so the script does as few as it can. Reads share
-- one MGET and writes one MSET; the revision comes from INCR, whose integer
-- reply needs no parsing; the claim fields are looked for only after the
-- agent of a claimed run; each new JSON text is one string.format; and the
-- reply is one string rather than a table.
--
-- KEYS[1] is the namespace's base (see base.lua for the layout).
-- ARGV: now ('' for Redis's clock), run id, agent, claim TTL ms, and the
-- agent as Go's encoding/json writes it. The names of package state's keys
-- (internal/layout) are not arguments, which cost too, but spelled out in
-- the script by scripts.go: $RunPrefix, $ClaimedCount, $ChildCounts and
-- $Claimed below.
-- Reply: one string, the outcome as a digit (1 not found, 2 finished, 3
-- held by another agent, 4 acquired, 5 renewed, 6 a join parent waiting
-- for its children: backend.ClaimOutcome) and reclaimed (0 or 1), then for
-- 4 and 5 the run's new record packed (whose updated time is now), and for
-- the others now (struct '<i8') and the run's record packed, if any.
--
-- A child run (parent_run_id right after claim_ttl_ms) that becomes claimed
-- also bumps its parent's counter of claimed children,
-- n/c/<parent escaped as layout.EscapeID does>/claimed.
--
-- The run's JSON (layout.RunValue as Go's json.Marshal writes it) is not
-- decoded: the fields claims change, which come first (status to
-- claim_ttl_ms), are matched as text at the start of the value, the
-- agent's JSON string kept as it is, and every byte after claim_ttl_ms
-- (name, tags, created_at) is kept as it is. Inside a JSON string every
-- quote is escaped, so the agent's string cannot contain ,"last_step":.
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
local st, ag, ls, att, fence, upd, rest = string.match(r, '^{"status":"(%l+)"(.-),"last_step":(%-?%d+),"attempt":(%-?%d+),' ..
  '"fence":(%-?%d+),"updated_at":(%-?%d+)(.*)$', 37 + rwl)
if not st then error({err = 'redisstate: stored run is not in the layout package state writes'}) end
if st == 'done' or st == 'failed' then return '20' .. struct.pack('<i8', now) .. r end
if st == 'waiting' then return '60' .. struct.pack('<i8', now) .. r end

-- The claim is live while the run has an agent and an expiry after now.
-- The claim fields are looked for only where one may start (',"c').
local held, id, agent, ttl, aj = false, ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if string.byte(rest, 3) == 99 then
  local cx, tail = string.match(rest, '^,"claim_expires_at":(%-?%d+)(.*)$')
  if cx then
    rest = tail
    held = ag ~= '' and tonumber(cx) > now
  end
  tail = string.match(rest, '^,"claim_ttl_ms":%-?%d+(.*)$')
  if tail then rest = tail end
end
if held and ag ~= ',"agent_id":' .. aj then return '30' .. struct.pack('<i8', now) .. r end

local old = '{"status":"' .. st .. '"' .. ag .. ',"attempt":' .. att .. ',"fence":' .. fence .. ',"last_step":' .. ls .. '}'
local op, re, value, prev, nst, pk = 'workflow.heartbeat', '0', old, '', st, nil
if not held then
  -- A fresh claim, or a takeover from a holder whose claim expired.
  prev, op = old, 'workflow.claim'
  if ag ~= '' then op, re = 'workflow.reclaim', '1' end
  if st == 'created' then
    nst = 'claimed'
    if string.byte(rest, 3) == 112 and string.sub(rest, 1, 18) == ',"parent_run_id":"' then
      -- One more claimed child of its parent: found before anything is
      -- written, since decoding can fail.
      local i = 19
      while i <= #rest and string.sub(rest, i, i) ~= '"' do
        if string.sub(rest, i, i) == '\\' then i = i + 1 end
        i = i + 1
      end
      local p = cjson.decode(string.sub(rest, 18, i))
      pk = B .. ':r:$ChildCounts' .. (string.gsub(p, '[^%w%-%._~]', function(ch) return string.format('%%%02X', string.byte(ch)) end)) .. '/$Claimed'
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
local rr, hdr = nil, struct.pack('<i8i8i8i8i4', rev, rc, now, 0, 0)
if held then
  -- A heartbeat extends the claim and changes nothing else.
  rr = hdr .. '{"status":"' .. st .. '"' .. ag .. ',"last_step":' .. ls .. ',"attempt":' .. att .. ',"fence":' .. fence ..
    ',"updated_at":' .. upd .. string.format(',"claim_expires_at":%d,"claim_ttl_ms":', now + ttl) .. ttl .. rest
else
  local af = string.format('%d,"fence":%d', att + 1, fence + 1)
  value = '{"status":"' .. nst .. '","agent_id":' .. aj .. ',"attempt":' .. af .. ',"last_step":' .. ls .. '}'
  rr = hdr .. '{"status":"' .. nst .. '","agent_id":' .. aj .. ',"last_step":' .. ls .. ',"attempt":' .. af ..
    string.format(',"updated_at":%d,"claim_expires_at":%d,"claim_ttl_ms":', now, now + ttl) .. ttl .. rest
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
  struct.pack('<i8i8i4i4i4i4i4', rev, now, #id, #op, #agent, #value, #prev) .. id .. op .. agent .. value .. prev)
if m[2] then n = n + m[2] end
redis.call('RPUSH', B .. ':h:' .. id, string.format('%d', n))
redis.call('PUBLISH', B .. ':changes', '')
if held then return '50' .. rr end
return '4' .. re .. rr
