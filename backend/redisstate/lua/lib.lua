-- lib.lua is prepended to every script of package redisstate.
--
-- KEYS[1] is the namespace's base, "{<prefix>:<ns>}". Every key of the
-- namespace starts with it, so its hash tag keeps them all in one Cluster
-- slot and each script touches one slot:
--
--   <base>:r:<key>    HASH, one record: v value, w writer, r revision,
--                     c create revision, t updated ms, x expiry ms (0: never)
--   <base>:idx        ZSET of every record key, score 0 (lex order: List, Count)
--   <base>:exp        ZSET of the record keys that have an expiry, by expiry ms
--   <base>:rev        revision counter; never expires, never reset
--   <base>:eid        event id counter; never expires, never reset
--   <base>:h          HASH event id -> packed event (see ev)
--   <base>:hk:<key>   ZSET of the event ids of one event key, score the id
--   <base>:hks        SET of the event keys that have a <base>:hk:<key>
--
-- Times are integer Unix milliseconds; Lua numbers are doubles, exact up to
-- 2^53, and every number is formatted with %d before Redis or JSON sees it.
local B = KEYS[1]
local IDX, EXP, REV, EID = B .. ':idx', B .. ':exp', B .. ':rev', B .. ':eid'
local HIST, HKEYS = B .. ':h', B .. ':hks'

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

-- rec returns the fields {v, w, r, c, t, x} of a record, or nil if absent.
local function rec(k)
  local f = redis.call('HMGET', rk(k), 'v', 'w', 'r', 'c', 't', 'x')
  if f[3] then return f end
  return nil
end

-- put writes a record at revision rev, keeping its create revision while it
-- is live, and returns its new fields.
local function put(k, v, w, ttl, t, rev, now)
  local key = rk(k)
  local old = redis.call('HMGET', key, 'c', 'x')
  local c, x = rev, 0
  if old[1] and live(old[2], now) then c = tonumber(old[1]) end
  if ttl > 0 then x = now + ttl end
  redis.call('HSET', key, 'v', v, 'w', w, 'r', I(rev), 'c', I(c), 't', I(t), 'x', I(x))
  if not old[1] then redis.call('ZADD', IDX, 0, k) end
  if x > 0 then
    redis.call('ZADD', EXP, I(x), k)
  elseif old[1] and tonumber(old[2]) ~= 0 then
    redis.call('ZREM', EXP, k)
  end
  return {v, w, rev, c, t, x}
end

-- del removes a record.
local function del(k)
  if redis.call('DEL', rk(k)) == 1 then
    redis.call('ZREM', IDX, k)
    redis.call('ZREM', EXP, k)
  end
end

-- ev appends an event. Its packed form is a header of decimal numbers
-- "rev,time,len(key),len(op),len(writer),len(value),len(prev);" followed by
-- key, op, writer, value and prev: binary-safe and cheap to parse.
local function ev(k, op, v, p, w, t, rev)
  local id = I(redis.call('INCR', EID))
  redis.call('HSET', HIST, id,
    string.format('%d,%d,%d,%d,%d,%d,%d;', rev, t, #k, #op, #w, #v, #p) .. k .. op .. w .. v .. p)
  redis.call('ZADD', hk(k), id, id)
  redis.call('SADD', HKEYS, k)
end

-- unev parses the key and time of a packed event.
local function unev(s)
  local _, t, kl, _, _, _, _, h = string.match(s, '^(%d+),(-?%d+),(%d+),(%d+),(%d+),(%d+),(%d+);()')
  return string.sub(s, h, h + tonumber(kl) - 1), tonumber(t)
end

-- dropev removes event id, whose packed form is s.
local function dropev(id, s)
  local k = unev(s)
  redis.call('HDEL', HIST, id)
  redis.call('ZREM', hk(k), id)
  if redis.call('EXISTS', hk(k)) == 0 then redis.call('SREM', HKEYS, k) end
end

-- jstr encodes a string as JSON exactly as Go's encoding/json does, so that
-- records written here are byte for byte those package state writes.
local JESC = {['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t',
  ['\b'] = '\\b', ['\f'] = '\\f', ['<'] = '\\u003c', ['>'] = '\\u003e', ['&'] = '\\u0026'}
local function jstr(s)
  s = string.gsub(s, '[%z\1-\31"\\<>&]', function(c) return JESC[c] or string.format('\\u%04x', string.byte(c)) end)
  s = string.gsub(s, '\226\128\168', '\\u2028')
  s = string.gsub(s, '\226\128\169', '\\u2029')
  return '"' .. s .. '"'
end

-- append adds the values of t to the array out.
local function append(out, t)
  for i = 1, #t do out[#out + 1] = t[i] end
  return out
end
