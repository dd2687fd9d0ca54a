-- reset.lua deletes every record and event of the namespace in one atomic
-- step, keeping its revision and event id counters (backend.Driver.Reset).
-- It takes time in proportion to what the namespace holds.
--
-- ARGV: per counted prefix its lex lower and upper bounds.
-- Reply: {records deleted under the counted prefixes, events deleted}.
local records = 0
for i = 1, #ARGV, 2 do
  records = records + redis.call('ZLEXCOUNT', IDX, ARGV[i], ARGV[i + 1])
end
local events = redis.call('XLEN', HIST)
while true do
  local ks = redis.call('ZRANGE', IDX, 0, 999)
  if #ks == 0 then break end
  local rks = {}
  for i, k in ipairs(ks) do rks[i] = rk(k) end
  redis.call('DEL', unpack(rks))
  redis.call('ZREM', IDX, unpack(ks))
end
-- The per-key event indexes are found through the events themselves.
local from = '-'
while true do
  local es = redis.call('XRANGE', HIST, from, '+', 'COUNT', 100)
  if #es == 0 then break end
  for _, e in ipairs(es) do redis.call('DEL', hk((unev(e[2][2])))) end
  from = '(' .. es[#es][1]
end
redis.call('DEL', EXP, HIST)
return {records, events}
