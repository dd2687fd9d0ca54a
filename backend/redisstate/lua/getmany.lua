-- getmany.lua reads records (backend.Driver.GetMany).
--
-- ARGV: now ('' for Redis's clock), then record keys.
-- Reply: {now, then per key its packed record (false: absent)}. The caller
-- decides liveness against the returned now.
local out = {clock(ARGV[1])}
for i = 2, #ARGV do out[i] = rec(ARGV[i]) end
return out
