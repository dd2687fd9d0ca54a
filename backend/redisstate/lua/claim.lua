-- claim.lua claims a workflow run in one step (backend.Claimer), following
-- exactly the rules of the portable code in package state (claim.go) and
-- writing the same records and events.
--
-- ARGV: now ('' for Redis's clock), run id, agent, claim TTL ms, run record
-- key, claim record key, status index prefix.
-- Reply: {outcome, now, reclaimed 0|1, run fields v w r c t x, claim fields
-- v w r c t x}, where outcome is 1 not found, 2 finished, 3 held by another
-- agent, 4 acquired, 5 renewed (backend.ClaimOutcome).

-- runev summarises a run for history (layout.EventOf without a step).
local function runev(v)
  local s = '{"status":' .. jstr(v.status)
  if type(v.agent_id) == 'string' and v.agent_id ~= '' then s = s .. ',"agent_id":' .. jstr(v.agent_id) end
  return s .. ',"attempt":' .. I(v.attempt) .. ',"fence":' .. I(v.fence) .. ',"last_step":' .. I(v.last_step) .. '}'
end

-- runhead returns the stored run JSON up to its top-level "status": the
-- name and tags, kept byte for byte. Inside a JSON string every quote is
-- escaped, so the last ,"status": is the top-level one.
local function runhead(s)
  local at, i = nil, 1
  while true do
    local j = string.find(s, ',"status":', i, true)
    if not j then break end
    at, i = j, j + 1
  end
  if not at then error({err = 'redisstate: stored run is not in the layout package state writes'}) end
  return string.sub(s, 1, at - 1)
end

-- runjson encodes a run as Go's json.Marshal(layout.RunValue) does.
local function runjson(head, v)
  local s = head .. ',"status":' .. jstr(v.status)
  if type(v.agent_id) == 'string' and v.agent_id ~= '' then s = s .. ',"agent_id":' .. jstr(v.agent_id) end
  return s .. ',"last_step":' .. I(v.last_step) .. ',"attempt":' .. I(v.attempt) .. ',"fence":' .. I(v.fence) ..
    ',"created_at":' .. I(v.created_at) .. ',"updated_at":' .. I(v.updated_at) .. ',"order":' .. jstr(v.order) .. '}'
end

local now = clock(ARGV[1])
local id, agent, ttl = ARGV[2], ARGV[3], tonumber(ARGV[4])
local rkey, ckey, sidx = ARGV[5], ARGV[6], ARGV[7]
local NONE = {false, false, false, false, false, false}

local r = rec(rkey)
if not r or not live(r[6], now) then return {1, now, 0} end
local v = cjson.decode(r[1])
local st = v.status
if st == 'done' or st == 'failed' then return append(append({2, now, 0}, r), NONE) end
local c = rec(ckey)
local held = c and live(c[6], now)
if held and c[2] ~= agent then return append(append({3, now, 0}, r), c) end

local rev = redis.call('INCR', REV)
if held then -- the holder again: a heartbeat
  local cr = put(ckey, I(ttl), agent, ttl, now, rev, now, meta(c))
  ev(id, 'workflow.heartbeat', runev(v), '', agent, now, rev)
  return append(append({5, now, 0}, r), cr)
end

-- A fresh claim, or a takeover from a holder whose claim expired.
local prev = runev(v)
local reclaim = type(v.agent_id) == 'string' and v.agent_id ~= ''
local head = runhead(r[1])
if st == 'created' then v.status = 'claimed' end
v.agent_id = agent
v.attempt = v.attempt + 1
v.fence = v.fence + 1
v.updated_at = now
local rr = put(rkey, runjson(head, v), '', 0, now, rev, now, meta(r))
if v.status ~= st then
  del(sidx .. st .. '/' .. v.order)
  put(sidx .. v.status .. '/' .. v.order, '', '', 0, now, rev, now)
end
local cr = put(ckey, I(ttl), agent, ttl, now, rev, now, meta(c))
local op, re = 'workflow.claim', 0
if reclaim then op, re = 'workflow.reclaim', 1 end
ev(id, op, runev(v), prev, agent, now, rev)
return append(append({4, now, re}, rr), cr)
