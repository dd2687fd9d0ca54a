-- getmany.lua reads records (backend.Driver.Get and GetMany).
--
-- ARGV: now ('' for Redis's clock), then record keys.
-- Reply: {now, then per key its fields v, w, r, c, t, x (nil when absent)}.
-- The caller decides liveness against the returned now.
local out = {clock(ARGV[1])}
for i = 2, #ARGV do
  append(out, redis.call('HMGET', rk(ARGV[i]), 'v', 'w', 'r', 'c', 't', 'x'))
end
return out
