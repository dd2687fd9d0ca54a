-- get.lua reads one record for backend.Driver.Get with a zero now. It is
-- kept apart from the other scripts' helpers: it is the hottest read, and
-- Go decodes the record and does the arithmetic.
--
-- KEYS[1] is the record's key.
-- Reply: the packed record alone when it never expires (no clock needed),
-- nil when it is absent, otherwise {packed record, TIME seconds, TIME
-- microseconds} so that Go judges its expiry by Redis's clock.
local s = redis.call('GET', KEYS[1])
if not s or struct.unpack('<i8', s, 25) == 0 then return s end
local t = redis.call('TIME')
return {s, t[1], t[2]}
