-- reset.lua deletes every record and event of the namespace in one atomic
-- step, keeping its revision and event id counters (backend.Driver.Reset).
--
-- ARGV: per counted prefix its lex lower and upper bounds.
-- Reply: {records deleted under the counted prefixes, events deleted}.
local records = 0
for i = 1, #ARGV, 2 do
  records = records + redis.call('ZLEXCOUNT', IDX, ARGV[i], ARGV[i + 1])
end
local events = redis.call('HLEN', HIST)
while true do
  local ks = redis.call('ZRANGE', IDX, 0, 999)
  if #ks == 0 then break end
  local rks = {}
  for i, k in ipairs(ks) do rks[i] = rk(k) end
  redis.call('DEL', unpack(rks))
  redis.call('ZREM', IDX, unpack(ks))
end
while true do
  local ks = redis.call('SPOP', HKEYS, 1000)
  if #ks == 0 then break end
  local hks = {}
  for i, k in ipairs(ks) do hks[i] = hk(k) end
  redis.call('DEL', unpack(hks))
end
redis.call('DEL', EXP, HIST)
return {records, events}
