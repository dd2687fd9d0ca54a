-- claim.lua claims workflow runs (backend.Claimer), one after another in
-- one step, following exactly the rules of the portable code in package
-- state (claim.go) and writing the same records and events: the run, which
-- holds its claim (backend's layout.go), the counter of claimed runs when a
-- created run becomes claimed, and one history event per claim. The driver
-- sends the claims of one namespace that wait at the same moment together
-- (batch.go); a claim made alone goes to claimone.lua, which must decide
-- and write exactly as this script does for a batch of one (the
-- conformance suite runs through each). It stands alone and spells out the record and event formats of
-- rec.lua and ev.lua: it is a hot path, and helpers cost even unused.
--
-- Every Lua operation costs here: a call of a library function (a
-- string.format, a struct.pack, a tonumber) takes about as long as Redis
-- takes for a whole SET, and concatenating a number (which Lua converts
-- with "%.14g") several times longer, so numbers go through one
-- string.format each, the script does as few calls as it can, and a batch
-- shares them: one TIME, one MGET of every run and counter, one MSET of
-- everything written (the revision counter too), one RPUSH of every event
-- and one PUBLISH. What a claim writes is kept in a table that later claims
-- of the batch read, so that a run claimed twice in a batch is claimed in
-- order; nothing is written before every claim has been decided, so a
-- claim that fails (a corrupt record) fails the batch having written
-- nothing, and the driver then sends each claim alone. The run's fields
-- come out of one struct.unpack and go back with one struct.pack; each
-- claim's reply is one string rather than a table.
--
-- KEYS[1] is the namespace's base (see base.lua for the layout).
-- ARGV: now ('' for Redis's clock), then per claim: run id, the event's
-- writer (the agent, or the agent joined with the principal it acts for:
-- backend.ClaimQuery.Writer), claim TTL ms, and the agent as Go's
-- encoding/json writes it (which is all the script compares and keeps). The names of the
-- layout's keys are not arguments, which cost too, but spelled out in the
-- script by scripts.go: $RunPrefix, $ClaimedCount, $ChildCounts and
-- $Claimed below.
-- Reply: per claim one string, the outcome as a digit (1 not found, 2
-- finished, 3 held by another agent, 4 acquired, 5 renewed, 6 a join parent
-- waiting for its children: backend.ClaimOutcome; 0 a run stored as JSON,
-- which the script leaves to package state's portable claim:
-- backend.ErrSkip) and reclaimed (0 or 1), then for 4 and 5 the run's new
-- record packed (whose updated time is now), and for the others now
-- (struct '<i8') and the run's record packed, if any.
--
-- The run's value is packed (runs.go): its fields, status to the parent's
-- id, then the JSON of the fields no claim changes (name, tags, ...), kept
-- as it is. The agent is kept as its JSON, as the events spell it. A child
-- run (one with a parent) that becomes claimed also bumps its parent's
-- counter of claimed children, n/c/<parent escaped as backend.EscapeID
-- does>/claimed. Attempts and fences are packed only below 10^14 (runs.go).
local B = KEYS[1]
local CK, REV, EXP = B .. ':r:$ClaimedCount', B .. ':rev', B .. ':exp'
local now = ARGV[1]
if now == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
else
  now = tonumber(now)
end
local nowp = struct.pack('<i8', now)
local n = (#ARGV - 1) / 4

-- Reads: the count of removed events, the revision counter, the counter
-- of claimed runs and every run.
local keys = {B .. ':off', REV, CK}
for i = 1, n do keys[3 + i] = B .. ':r:$RunPrefix' .. ARGV[4 * i - 2] end
local m = redis.call('MGET', unpack(keys))
local cur = {} -- key -> record (false: absent), as this batch leaves it
for i = 3, #keys do
  if cur[keys[i]] == nil then cur[keys[i]] = m[i] end
end
-- A fresh revision counter (a new namespace, or one Redis lost) starts
-- from Redis's clock in microseconds, above every revision handed out
-- before (see redisstate.go).
local rev = tonumber(m[2])
if not rev then
  local t = redis.call('TIME')
  rev = t[1] * 1000000 + t[2] - 1
end

local dirty, order = {}, {} -- keys to write, in order
local zrem, zidx = {}, {}   -- members of :exp to remove, of :idx to add
local evs, hks = {}, {}     -- events, and the history list of each
local function put(k, v)
  cur[k] = v
  if not dirty[k] then dirty[k] = true; order[#order + 1] = k end
end
-- A counter (the claimed runs', a parent's claimed children) bumped by
-- claims of the batch: rec.lua's put of a counter record (no writer, never
-- expires) holding one more than the record at counter key ck, once per
-- claim but packed once, at the end, with the revision of its last bump.
local cnt, corder = {}, {} -- counter key -> {count, create revision, revision}
local function bump(ck)
  local c = cnt[ck]
  if c then
    c[1], c[3] = c[1] + 1, rev
    return
  end
  local r = cur[ck]
  if r == nil then r = redis.call('GET', ck) end
  local n1, cc = 1, rev
  if r then
    local _, c0, _, cx0 = struct.unpack('<i8i8i8i8', r)
    if cx0 == 0 or cx0 > now then n1, cc = (tonumber(string.sub(r, 37)) or 0) + 1, c0 end
    if cx0 ~= 0 then zrem[#zrem + 1] = string.sub(ck, #B + 4) end
  else
    zidx[#zidx + 1] = '0'
    zidx[#zidx + 1] = string.sub(ck, #B + 4)
  end
  cnt[ck] = {n1, cc, rev}
  corder[#corder + 1] = ck
end

local RUN = '<Bi8i8i8i8i8Bc0Bc0i4c0i4c0'
local REC = '<i8i8i8i8i4' .. RUN -- the record: its header, then the run
local function claim(RK, id, writer, ttl, aj)
  local r = cur[RK]
  if not r then return '10' .. nowp end
  local _, rc, _, rx, rwl = struct.unpack('<i8i8i8i8i4', r)
  if rx ~= 0 and rx <= now then return '10' .. nowp end
  if string.byte(r, 37 + rwl) ~= 1 then return '00' end
  local _, att, fence, upd, cx, _, st, ls, ag, par, tp = struct.unpack(RUN, r, 37 + rwl)
  if st == 'done' or st == 'failed' then return '20' .. nowp .. r end
  if st == 'waiting' then return '60' .. nowp .. r end

  -- The claim is live while the run has an agent and an expiry after now.
  -- The TTL stays a string: arithmetic and struct.pack take it as a number.
  local held = ag ~= '' and cx > now
  if held and ag ~= aj then return '30' .. nowp .. r end

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

  rev = rev + 1
  local rr, tail = nil, string.sub(r, tp)
  if held then
    -- A heartbeat extends the claim and changes nothing else.
    rr = struct.pack(REC, rev, rc, now, 0, 0, 1, att, fence, upd, now + ttl, ttl,
      #st, st, #ls, ls, #ag, ag, #par, par) .. tail
  else
    value = '{"status":"' .. nst .. '","agent_id":' .. aj ..
      string.format(',"attempt":%d,"fence":%d,"last_step":', att + 1, fence + 1) .. ls .. '}'
    rr = struct.pack(REC, rev, rc, now, 0, 0, 1, att + 1, fence + 1, now, now + ttl, ttl,
      #nst, nst, #ls, ls, #aj, aj, #par, par) .. tail
  end
  if rx ~= 0 then zrem[#zrem + 1] = '$RunPrefix' .. id end
  put(RK, rr)
  if nst ~= st then
    bump(CK)
    if pk then bump(pk) end
  end
  evs[#evs + 1] = struct.pack('<i8i8i4i4i4i4i4', rev, now, #id, #op, #writer, #value, #prev) .. id .. op .. writer .. value .. prev
  hks[#hks + 1] = B .. ':h:' .. id
  if held then return '50' .. rr end
  return '4' .. re .. rr
end

local out = {}
for i = 1, n do
  local a = 4 * i - 2
  out[i] = claim(keys[3 + i], ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3])
end
if #evs == 0 then return out end

local w = {}
for _, k in ipairs(order) do
  w[#w + 1] = k
  w[#w + 1] = cur[k]
end
for _, ck in ipairs(corder) do
  local c = cnt[ck]
  w[#w + 1] = ck
  w[#w + 1] = struct.pack('<i8i8i8i8i4', c[3], c[2], now, 0, 0) .. string.format('%d', c[1])
end
w[#w + 1] = REV
w[#w + 1] = string.format('%d', rev)
redis.call('MSET', unpack(w))
if #zrem > 0 then redis.call('ZREM', EXP, unpack(zrem)) end
if #zidx > 0 then redis.call('ZADD', B .. ':idx', unpack(zidx)) end
local id0 = redis.call('RPUSH', B .. ':ev', unpack(evs)) - #evs + (tonumber(m[1]) or 0)
for j, hk in ipairs(hks) do redis.call('RPUSH', hk, string.format('%d', id0 + j)) end
redis.call('PUBLISH', B .. ':changes', '')
return out
