-- list.lua lists live records by key range (backend.Driver.List).
--
-- ARGV: now ('' for Redis's clock), lex lower bound, lex upper bound
-- (ZRANGEBYLEX syntax), limit, keys only ('1' or '0').
-- Reply: {now, then per record its key and fields v, w, r, c, t, x}.
local now = clock(ARGV[1])
local lo, hi, limit, keysOnly = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5] == '1'
local out, n = {now}, 0
local batch = limit + 16
while n < limit do
  local ks = redis.call('ZRANGEBYLEX', IDX, lo, hi, 'LIMIT', 0, batch)
  for _, k in ipairs(ks) do
    local f
    if keysOnly then
      f = redis.call('HMGET', rk(k), 'w', 'r', 'c', 't', 'x')
      table.insert(f, 1, false)
    else
      f = redis.call('HMGET', rk(k), 'v', 'w', 'r', 'c', 't', 'x')
    end
    if f[3] and live(f[6], now) then
      out[#out + 1] = k
      append(out, f)
      n = n + 1
      if n == limit then break end
    end
  end
  if #ks < batch then break end
  lo = '(' .. ks[#ks]
end
return out
