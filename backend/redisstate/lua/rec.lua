-- rec.lua: reading and writing records (included by the scripts that write).

-- rec returns the fields {v, w, r, c, t, x} of a record, or nil if absent.
local function rec(k)
  local f = redis.call('HMGET', rk(k), 'v', 'w', 'r', 'c', 't', 'x')
  if f[3] then return f end
  return nil
end

-- meta returns the revision, create revision and expiry {r, c, x} of a
-- record's fields {v, w, r, c, t, x}, or of an absent record.
local function meta(f)
  if f then return {f[3], f[4], f[6]} end
  return {false, false, false}
end

-- put writes a record at revision rev, keeping its create revision while it
-- is live, and returns its new fields. old is the record's {r, c, x} when
-- the caller has read it, or nil to read it here.
local function put(k, v, w, ttl, t, rev, now, old)
  local key = rk(k)
  old = old or redis.call('HMGET', key, 'r', 'c', 'x')
  local c, x = rev, 0
  if old[1] and live(old[3], now) then c = tonumber(old[2]) end
  if ttl > 0 then x = now + ttl end
  redis.call('HSET', key, 'v', v, 'w', w, 'r', I(rev), 'c', I(c), 't', I(t), 'x', I(x))
  if not old[1] then redis.call('ZADD', IDX, 0, k) end
  if x > 0 then
    redis.call('ZADD', EXP, I(x), k)
  elseif old[1] and tonumber(old[3]) ~= 0 then
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
