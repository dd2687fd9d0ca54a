-- base.lua is prepended to every script of package redisstate but get.lua.
--
-- KEYS[1] is the namespace's base, "{<prefix>:<ns>}". Every key of the
-- namespace starts with it, so its hash tag keeps them all in one Cluster
-- slot and each script touches one slot:
--
--   <base>:r:<key>  HASH, one record: v value, w writer, r revision,
--                   c create revision, t updated ms, x expiry ms (0: never)
--   <base>:idx      ZSET of every record key, score 0 (lex order: List, Count)
--   <base>:exp      ZSET of the record keys that have an expiry, by expiry ms
--   <base>:rev      revision counter; never expires, never reset
--   <base>:eid      event id counter; never expires, never reset
--   <base>:hs       STREAM of events, entry id "<event id>-0", one field
--                   "e" holding the packed event (see ev.lua)
--   <base>:hk:<key> ZSET of the ids of the events of one key, score the id
--
-- Times are integer Unix milliseconds. Lua numbers are doubles, exact up to
-- 2^53, and every number is formatted with %d before Redis or JSON sees it.
local B = KEYS[1]
local IDX, EXP, REV, EID = B .. ':idx', B .. ':exp', B .. ':rev', B .. ':eid'
local HIST = B .. ':hs'

local function rk(k) return B .. ':r:' .. k end
local function hk(k) return B .. ':hk:' .. k end

-- I formats an integer exactly.
local function I(n) return string.format('%d', n) end

-- clock returns the time given by the caller, or Redis's own clock when the
-- caller gave none (''), so that every replica agrees on expiry.
local function clock(a)
  if a ~= '' then return tonumber(a) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- live reports whether a record with expiry x is live at now.
local function live(x, now)
  local n = tonumber(x)
  return n == nil or n == 0 or n > now
end

-- append adds the values of t to the array out.
local function append(out, t)
  for i = 1, #t do out[#out + 1] = t[i] end
  return out
end
