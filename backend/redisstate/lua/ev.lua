-- ev.lua: appending and dropping history events.

-- ev appends an event. Its packed form is a header of decimal numbers
-- "rev,time,len(key),len(op),len(writer),len(value),len(prev);" followed by
-- key, op, writer, value and prev: binary-safe and cheap to parse.
local function ev(k, op, v, p, w, t, rev)
  local id = I(redis.call('INCR', EID))
  redis.call('XADD', HIST, id .. '-0', 'e',
    string.format('%d,%d,%d,%d,%d,%d,%d;', rev, t, #k, #op, #w, #v, #p) .. k .. op .. w .. v .. p)
  redis.call('ZADD', hk(k), id, id)
end

-- unev parses the key and time of a packed event.
local function unev(s)
  local _, t, kl, h = string.match(s, '^(%d+),(-?%d+),(%d+),%d+,%d+,%d+,%d+;()')
  return string.sub(s, h, h + tonumber(kl) - 1), tonumber(t)
end

-- evid returns the event id of a stream entry id "<id>-0".
local function evid(sid) return string.sub(sid, 1, -3) end
