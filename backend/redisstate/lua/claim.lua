-- claim.lua claims a workflow run in one step (backend.Claimer), following
-- exactly the rules of the portable code in package state (claim.go) and
-- writing the same records and events. It stands alone and spells out the
-- record and event formats of rec.lua and ev.lua: it is a hot path, and
-- helpers cost even unused. Reads share one MGET and writes one MSET.
--
-- KEYS[1] is the namespace's base (see base.lua for the layout).
-- ARGV: now ('' for Redis's clock), run id, agent, claim TTL ms, run record
-- key, claim record key, status index prefix, agent as Go's encoding/json
-- writes it.
-- Reply: {outcome, now, reclaimed 0|1[, run record, claim record]}, records
-- packed (false: absent), where outcome is 1 not found, 2 finished, 3 held
-- by another agent, 4 acquired, 5 renewed (backend.ClaimOutcome).
--
-- The run's JSON (layout.RunValue as Go's json.Marshal writes it) is not
-- decoded: its head (name and tags) is kept byte for byte and the fields
-- after the top-level "status" are matched as text, the JSON strings of
-- agent and order kept as they are. Inside a JSON string every quote is
-- escaped, so the last ,"status": is the top-level one, and the agent's
-- string cannot contain ,"last_step":.
local B = KEYS[1]
local now = ARGV[1]
if now == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
else
  now = tonumber(now)
end
local RH, id, agent, ttl, rkey, ckey = '<i8i8i8i8i4', ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6]
local RK, CK, REV = B .. ':r:' .. rkey, B .. ':r:' .. ckey, B .. ':rev'

-- The run, its claim, and the counters of revisions and removed events.
local m = redis.call('MGET', RK, CK, REV, B .. ':off')
local r, c = m[1], m[2]
if not r then return {1, now, 0} end
local _, rc, _, rx, rwl = struct.unpack(RH, r)
if rx ~= 0 and rx <= now then return {1, now, 0} end
local v0, at, i = 37 + rwl, nil, 37 + rwl -- the value starts at v0
while true do
  local j = string.find(r, ',"status":', i, true)
  if not j then break end
  at, i = j, j + 1
end
local st, ag, ls, att, fence, ca, ord
if at then
  st, ag, ls, att, fence, ca, ord = string.match(r, '^,"status":"(%l+)"(.-),"last_step":(%-?%d+),"attempt":(%-?%d+),' ..
    '"fence":(%-?%d+),"created_at":(%-?%d+),"updated_at":%-?%d+,"order":("[^"]*")}$', at)
end
if not st then error({err = 'redisstate: stored run is not in the layout package state writes'}) end
if st == 'done' or st == 'failed' then return {2, now, 0, r, false} end

local held, cc = false, 0
if c then
  local _, c2, _, x2, cwl = struct.unpack(RH, c)
  if x2 == 0 or x2 > now then
    if string.sub(c, 37, 36 + cwl) ~= agent then return {3, now, 0, r, c} end
    held, cc = true, c2
  end
end

-- The claim record keeps its create revision while it is live.
local rev = (tonumber(m[3]) or 0) + 1
local x = now + ttl
if not held then cc = rev end
local cr = struct.pack(RH, rev, cc, now, x, #agent) .. agent .. ARGV[4]
local sets = {CK, cr, REV, string.format('%d', rev)}
redis.call('ZADD', B .. ':exp', string.format('%d', x), ckey)

-- A heartbeat writes the claim alone; a fresh claim or a takeover from an
-- expired holder writes the run too, and moves it between status indexes.
local op, re, value, prev, rr = 'workflow.heartbeat', 0, nil, '', r
if held then
  value = '{"status":"' .. st .. '"' .. ag .. ',"attempt":' .. att .. ',"fence":' .. fence .. ',"last_step":' .. ls .. '}'
else
  prev = '{"status":"' .. st .. '"' .. ag .. ',"attempt":' .. att .. ',"fence":' .. fence .. ',"last_step":' .. ls .. '}'
  op = 'workflow.claim'
  if ag ~= '' then op, re = 'workflow.reclaim', 1 end
  local nst, nag = st, ',"agent_id":' .. ARGV[8]
  if st == 'created' then nst = 'claimed' end
  att, fence = string.format('%d', att + 1), string.format('%d', fence + 1)
  value = '{"status":"' .. nst .. '"' .. nag .. ',"attempt":' .. att .. ',"fence":' .. fence .. ',"last_step":' .. ls .. '}'
  rr = struct.pack(RH, rev, rc, now, 0, 0) .. string.sub(r, v0, at - 1) .. ',"status":"' .. nst .. '"' .. nag ..
    ',"last_step":' .. ls .. ',"attempt":' .. att .. ',"fence":' .. fence .. ',"created_at":' .. ca ..
    ',"updated_at":' .. string.format('%d', now) .. ',"order":' .. ord .. '}'
  sets[5], sets[6] = RK, rr
  if rx ~= 0 then redis.call('ZREM', B .. ':exp', rkey) end
  local adds = {}
  if not c then adds = {'0', ckey} end
  if nst ~= st then
    local o = string.sub(ord, 2, -2)
    if string.find(o, '\\', 1, true) then o = cjson.decode(ord) end
    local ok, nk = ARGV[7] .. st .. '/' .. o, ARGV[7] .. nst .. '/' .. o
    local gone = redis.call('GETDEL', B .. ':r:' .. ok)
    if gone then
      redis.call('ZREM', B .. ':idx', ok)
      if struct.unpack('<i8', gone, 25) ~= 0 then redis.call('ZREM', B .. ':exp', ok) end
    end
    -- The new index entry is absent unless the index is inconsistent: ZADD
    -- says so, and only then is it read.
    local ic = rev
    if redis.call('ZADD', B .. ':idx', '0', nk, unpack(adds)) < 1 + #adds / 2 then
      local e = redis.call('GET', B .. ':r:' .. nk)
      if e then
        local _, ec, _, ex = struct.unpack(RH, e)
        if ex == 0 or ex > now then ic = ec end
        if ex ~= 0 then redis.call('ZREM', B .. ':exp', nk) end
      end
    end
    sets[7], sets[8] = B .. ':r:' .. nk, struct.pack(RH, rev, ic, now, 0, 0)
  elseif not c then
    redis.call('ZADD', B .. ':idx', '0', ckey)
  end
end
redis.call('MSET', unpack(sets))
local n = redis.call('RPUSH', B .. ':ev',
  struct.pack('<i8i8i4i4i4i4i4', rev, now, #id, #op, #agent, #value, #prev) .. id .. op .. agent .. value .. prev)
redis.call('RPUSH', B .. ':h:' .. id, string.format('%d', n + (tonumber(m[4]) or 0)))
if held then return {5, now, 0, r, cr} end
return {4, now, re, rr, cr}
