-- ev.lua: the history log.
--
-- A packed event is struct.pack(EH, revision, time ms, #key, #op, #writer,
-- #value, #prev), EHL bytes, followed by key, op, writer, value and prev.
-- Appending one is an RPUSH of it to <base>:ev, whose new length plus off
-- is its id, and an RPUSH of that id to <base>:h:<key> (commit.lua; the hot
-- scripts spell it out).
local EH, EHL = '<i8i8i4i4i4i4i4', 36

-- evpack packs an event.
local function evpack(k, op, v, p, w, t, rev)
  return struct.pack(EH, rev, t, #k, #op, #w, #v, #p) .. k .. op .. w .. v .. p
end

-- unev returns the key and time of a packed event.
local function unev(s)
  local _, t, kl = struct.unpack(EH, s)
  return string.sub(s, EHL + 1, EHL + kl), t
end
