-- reset.lua deletes every record and event of the namespace in one atomic
-- step, keeping its revision counter and moving its event offset past the
-- deleted events so that ids are not reused (backend.Driver.Reset). It
-- takes time in proportion to what the namespace holds.
--
-- ARGV: per counted prefix its lex lower and upper bounds.
-- Reply: {records deleted under the counted prefixes, events deleted}.
local IDX, EV = B .. ':idx', B .. ':ev'
local records = 0
for i = 1, #ARGV, 2 do
  records = records + redis.call('ZLEXCOUNT', IDX, ARGV[i], ARGV[i + 1])
end
while true do
  local ks = redis.call('ZRANGE', IDX, '0', '999')
  if #ks == 0 then break end
  local rks = {}
  for i, k in ipairs(ks) do rks[i] = B .. ':r:' .. k end
  redis.call('DEL', unpack(rks))
  redis.call('ZREM', IDX, unpack(ks))
end
-- The per-key lists of event ids are found through the events themselves.
local events, gone = redis.call('LLEN', EV), {}
for i = 0, events - 1, 100 do
  for _, e in ipairs(redis.call('LRANGE', EV, I(i), I(i + 99))) do
    local k = unev(e)
    if not gone[k] then
      gone[k] = true
      redis.call('DEL', B .. ':h:' .. k)
    end
  end
end
redis.call('DEL', B .. ':exp', EV)
if events > 0 then redis.call('INCRBY', B .. ':off', I(events)) end
redis.call('PUBLISH', B .. ':changes', '')
return {records, events}
