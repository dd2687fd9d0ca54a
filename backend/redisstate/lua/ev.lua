-- ev.lua: the history log.
--
-- A packed event is struct.pack(EH, revision, time ms, #key, #op, #writer,
-- #value, #prev), EHL bytes, followed by key, op, writer, value and prev.
local EH, EHL = '<i8i8i4i4i4i4i4', 36

-- evpack packs an event.
local function evpack(k, op, v, p, w, t, rev)
  return struct.pack(EH, rev, t, #k, #op, #w, #v, #p) .. k .. op .. w .. v .. p
end

-- ev appends one event of key k.
local function ev(k, op, v, p, w, t, rev)
  local n = redis.call('RPUSH', B .. ':ev', evpack(k, op, v, p, w, t, rev))
  redis.call('RPUSH', B .. ':h:' .. k, I((tonumber(redis.call('GET', B .. ':off')) or 0) + n))
end

-- unev returns the key and time of a packed event.
local function unev(s)
  local _, t, kl = struct.unpack(EH, s)
  return string.sub(s, EHL + 1, EHL + kl), t
end
