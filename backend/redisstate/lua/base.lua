-- base.lua is prepended to the cold scripts of package redisstate; the hot
-- ones (get.lua, set.lua, claim.lua, lease.lua) stand alone and spell out
-- the formats below, because Lua builds every helper anew on each call.
--
-- KEYS[1] is the namespace's base, "{<prefix>:<ns>}". Every key of the
-- namespace starts with it, so its hash tag keeps them all in one Cluster
-- slot and each script touches one slot:
--
--   <base>:r:<key>  STRING, one record: a 36-byte header of little-endian
--                   integers (struct '<i8i8i8i8i4': revision, create
--                   revision, updated ms, expiry ms (0: never), writer
--                   length), then the writer, then the value (rec.lua)
--   <base>:idx      ZSET of every record key, score 0 (lex order: List, Count)
--   <base>:exp      ZSET of the record keys that have an expiry, by expiry ms
--   <base>:rev      revision counter; never expires, never reset; a fresh
--                   one starts from Redis's clock in microseconds
--   <base>:ev       LIST of the packed events, oldest first (ev.lua)
--   <base>:off      how many events were ever removed from the head of
--                   <base>:ev (absent: 0); never decreases
--   <base>:h:<key>  LIST of the ids of the events of one key, oldest first
--   <base>:changes  pub/sub channel, not a key: every script that writes
--                   publishes an empty message to it (Driver.Notify)
--
-- Event ids are positions in the log: the event at index i (from 0) of
-- <base>:ev has id off+i+1. Appending gives the next id; Sweep pops from the
-- head and Reset empties the log, both adding what they removed to off, so
-- ids are contiguous, increase and are never reused.
--
-- Times are integer Unix milliseconds. Lua numbers are doubles, exact up to
-- 2^53. Numbers go to redis.call formatted by I: string concatenation would
-- lose digits (%.14g), and redis.call's own formatting (%.17g) is exact but
-- costs a microsecond.
local B = KEYS[1]

-- I formats an integer exactly.
local function I(n) return string.format('%d', n) end

-- clock returns the time given by the caller, or Redis's own clock when the
-- caller gave none (''), so that every replica agrees on expiry.
local function clock(a)
  if a ~= '' then return tonumber(a) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
