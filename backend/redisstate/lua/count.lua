-- count.lua counts live records under prefixes and the namespace's events
-- (backend.Driver.Count).
--
-- ARGV: now ('' for Redis's clock), then per prefix: the prefix, its lex
-- lower bound and its lex upper bound.
-- Reply: {events, then one count per prefix}.
--
-- Every record is in <base>:idx, expired ones too until they are swept, so
-- a count is ZLEXCOUNT minus the expired records under the prefix, found in
-- <base>:exp: the cost is the number of expired but unswept records, never
-- the size of the namespace.
local now = clock(ARGV[1])
local out, ps = {redis.call('LLEN', B .. ':ev')}, {}
for i = 2, #ARGV, 3 do
  ps[#ps + 1] = ARGV[i]
  out[#out + 1] = redis.call('ZLEXCOUNT', B .. ':idx', ARGV[i + 1], ARGV[i + 2])
end
local dead = redis.call('ZRANGEBYSCORE', B .. ':exp', '-inf', I(now))
for _, k in ipairs(dead) do
  for j, p in ipairs(ps) do
    if string.sub(k, 1, #p) == p then out[j + 1] = out[j + 1] - 1 end
  end
end
return out
