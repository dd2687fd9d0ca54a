-- claim.lua claims a workflow run in one step (backend.Claimer), following
-- exactly the rules of the portable code in package state (claim.go) and
-- writing the same records and events: the run, which holds its claim
-- (internal/layout), the counter of claimed runs when a created run
-- becomes claimed, and one history event. It stands alone and spells out the
-- record and event formats of rec.lua and ev.lua: it is a hot path, and
-- helpers cost even unused. Reads share one MGET and writes one MSET.
--
-- KEYS[1] is the namespace's base (see base.lua for the layout).
-- ARGV: now ('' for Redis's clock), run id, agent, claim TTL ms, run record
-- key, agent as Go's encoding/json writes it, record key of the counter of
-- claimed runs, prefix of the counters of children (n/c/), and the name of
-- the claimed counter (claimed).
-- Reply: {outcome, now, reclaimed 0|1[, run record]}, the record packed,
-- where outcome is 1 not found, 2 finished, 3 held by another agent, 4
-- acquired, 5 renewed, 6 a join parent waiting for its children
-- (backend.ClaimOutcome).
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
local now = ARGV[1]
if now == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
else
  now = tonumber(now)
end
local RH, id, agent, ttl, rkey, aj, cp = '<i8i8i8i8i4', ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local RK, REV = B .. ':r:' .. rkey, B .. ':rev'

-- The run, the counters of revisions and removed events, and the counter of
-- claimed runs.
local m = redis.call('MGET', RK, REV, B .. ':off', B .. ':r:' .. cp)
local r = m[1]
if not r then return {1, now, 0} end
local _, rc, _, rx, rwl = struct.unpack(RH, r)
if rx ~= 0 and rx <= now then return {1, now, 0} end
local st, ag, ls, att, fence, upd, rest = string.match(r, '^{"status":"(%l+)"(.-),"last_step":(%-?%d+),"attempt":(%-?%d+),' ..
  '"fence":(%-?%d+),"updated_at":(%-?%d+)(.*)$', 37 + rwl)
if not st then error({err = 'redisstate: stored run is not in the layout package state writes'}) end
if st == 'done' or st == 'failed' then return {2, now, 0, r} end
if st == 'waiting' then return {6, now, 0, r} end
local cx, tail = string.match(rest, '^,"claim_expires_at":(%-?%d+)(.*)$')
if cx then rest = tail else cx = '0' end
tail = string.match(rest, '^,"claim_ttl_ms":%-?%d+(.*)$')
if tail then rest = tail end

-- The claim is live while the run has an agent and an expiry after now.
local held = ag ~= '' and tonumber(cx) > now
if held and ag ~= ',"agent_id":' .. aj then return {3, now, 0, r} end

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
local x = string.format('%d', now + tonumber(ttl))
local claim = ',"claim_expires_at":' .. x .. ',"claim_ttl_ms":' .. ttl .. rest
local op, re, value, prev, rr = 'workflow.heartbeat', 0, nil, '', nil
local old = '{"status":"' .. st .. '"' .. ag .. ',"attempt":' .. att .. ',"fence":' .. fence .. ',"last_step":' .. ls .. '}'
local nst = st
if held then
  -- A heartbeat extends the claim and changes nothing else.
  value = old
  rr = struct.pack(RH, rev, rc, now, 0, 0) .. '{"status":"' .. st .. '"' .. ag .. ',"last_step":' .. ls ..
    ',"attempt":' .. att .. ',"fence":' .. fence .. ',"updated_at":' .. upd .. claim
else
  -- A fresh claim, or a takeover from a holder whose claim expired.
  prev, op = old, 'workflow.claim'
  if ag ~= '' then op, re = 'workflow.reclaim', 1 end
  local nag = ',"agent_id":' .. aj
  if st == 'created' then nst = 'claimed' end
  att, fence = string.format('%d', att + 1), string.format('%d', fence + 1)
  value = '{"status":"' .. nst .. '"' .. nag .. ',"attempt":' .. att .. ',"fence":' .. fence .. ',"last_step":' .. ls .. '}'
  rr = struct.pack(RH, rev, rc, now, 0, 0) .. '{"status":"' .. nst .. '"' .. nag .. ',"last_step":' .. ls ..
    ',"attempt":' .. att .. ',"fence":' .. fence .. ',"updated_at":' .. string.format('%d', now) .. claim
end
local sets = {RK, rr, REV, string.format('%d', rev)}
-- rec.lua's put of a counter record (no writer, never expires) holding one
-- more than c, the record at counter key ck (false when absent).
local function bump(ck, c)
  local n, cc = 1, rev
  if c then
    local _, c0, _, cx0 = struct.unpack('<i8i8i8i8', c)
    if cx0 == 0 or cx0 > now then n, cc = (tonumber(string.sub(c, 37)) or 0) + 1, c0 end
    if cx0 ~= 0 then redis.call('ZREM', B .. ':exp', ck) end
  else
    redis.call('ZADD', B .. ':idx', '0', ck)
  end
  return struct.pack(RH, rev, cc, now, 0, 0) .. string.format('%d', n)
end
if nst ~= st then
  -- One more claimed run, and one more claimed child of its parent.
  sets[5], sets[6] = B .. ':r:' .. cp, bump(cp, m[4])
  if string.sub(rest, 1, 18) == ',"parent_run_id":"' then
    local i = 19
    while i <= #rest and string.sub(rest, i, i) ~= '"' do
      if string.sub(rest, i, i) == '\\' then i = i + 1 end
      i = i + 1
    end
    local p = cjson.decode(string.sub(rest, 18, i))
    local pk = ARGV[8] .. (string.gsub(p, '[^%w%-%._~]', function(ch) return string.format('%%%02X', string.byte(ch)) end)) .. '/' .. ARGV[9]
    sets[7], sets[8] = B .. ':r:' .. pk, bump(pk, redis.call('GET', B .. ':r:' .. pk))
  end
end
if rx ~= 0 then redis.call('ZREM', B .. ':exp', rkey) end
redis.call('MSET', unpack(sets))
local n = redis.call('RPUSH', B .. ':ev',
  struct.pack('<i8i8i4i4i4i4i4', rev, now, #id, #op, #agent, #value, #prev) .. id .. op .. agent .. value .. prev)
redis.call('RPUSH', B .. ':h:' .. id, string.format('%d', n + (tonumber(m[3]) or 0)))
redis.call('PUBLISH', B .. ':changes', '')
if held then return {5, now, 0, rr} end
return {4, now, re, rr}
