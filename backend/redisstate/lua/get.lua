-- get.lua reads one record and Redis's clock, for backend.Driver.Get with a
-- zero now. It is kept apart from the other scripts' helpers: it is the
-- hottest read, and Go does the arithmetic.
--
-- KEYS[1] is the record's hash.
-- Reply: {TIME seconds, TIME microseconds, v, w, r, c, t, x}.
local t = redis.call('TIME')
local f = redis.call('HMGET', KEYS[1], 'v', 'w', 'r', 'c', 't', 'x')
return {t[1], t[2], f[1], f[2], f[3], f[4], f[5], f[6]}
