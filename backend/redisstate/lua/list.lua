-- list.lua lists live records by key range (backend.Driver.List).
--
-- ARGV: now ('' for Redis's clock), lex lower bound, lex upper bound
-- (ZRANGEBYLEX syntax), limit, keys only ('1' or '0').
-- Reply: {now, then per record its key and packed record}; with keys only,
-- the records are cut after the writer.
local now = clock(ARGV[1])
local lo, hi, limit, keysOnly = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5] == '1'
local out, n = {now}, 0
local batch = limit + 16
while n < limit do
  local ks = redis.call('ZRANGEBYLEX', B .. ':idx', lo, hi, 'LIMIT', '0', I(batch))
  for _, k in ipairs(ks) do
    local s = rec(k)
    if lrev(s, now) ~= 0 then
      if keysOnly then s = string.sub(s, 1, RHL + struct.unpack('<i4', s, 33)) end
      out[#out + 1] = k
      out[#out + 1] = s
      n = n + 1
      if n == limit then break end
    end
  end
  if #ks < batch then break end
  lo = '(' .. ks[#ks]
end
return out
