-- rec.lua: reading and writing records.
--
-- A record is one STRING, read with GET and written with SET. Its header,
-- struct.pack(RH, revision, create revision, updated ms, expiry ms, #writer),
-- is RHL bytes; the writer and the value follow. Scripts return records
-- packed, and Go decodes them (scripts.go).
local RH, RHL = '<i8i8i8i8i4', 36

-- rec returns the packed record at key k, or false when it is absent.
local function rec(k) return redis.call('GET', B .. ':r:' .. k) end

-- lrev returns the revision of packed record s if it is live at now, else 0.
local function lrev(s, now)
  if not s then return 0 end
  local r, _, _, x = struct.unpack(RH, s)
  if x ~= 0 and x <= now then return 0 end
  return r
end

-- put writes a record at revision rev, keeping its create revision while it
-- is live, and returns it packed. old is the record as read before (false:
-- absent), or nil to read it here.
local function put(k, v, w, ttl, t, rev, now, old)
  local key = B .. ':r:' .. k
  if old == nil then old = redis.call('GET', key) end
  local c, x, ox = rev, 0, 0
  if old then
    local _, oc, _, x0 = struct.unpack(RH, old)
    ox = x0
    if x0 == 0 or x0 > now then c = oc end
  end
  if ttl > 0 then x = now + ttl end
  local s = struct.pack(RH, rev, c, t, x, #w) .. w .. v
  redis.call('SET', key, s)
  if not old then redis.call('ZADD', B .. ':idx', '0', k) end
  if x > 0 then
    redis.call('ZADD', B .. ':exp', I(x), k)
  elseif ox ~= 0 then
    redis.call('ZREM', B .. ':exp', k)
  end
  return s
end

-- del removes a record and returns it packed, or false if it was absent.
local function del(k)
  local old = redis.call('GETDEL', B .. ':r:' .. k)
  if old then
    redis.call('ZREM', B .. ':idx', k)
    if struct.unpack('<i8', old, 25) ~= 0 then redis.call('ZREM', B .. ':exp', k) end
  end
  return old
end
