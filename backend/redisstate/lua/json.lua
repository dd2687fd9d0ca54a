-- json.lua: encoding strings as Go's encoding/json does, so that records
-- written by scripts are byte for byte those package state writes. Most
-- strings need no escaping and cost one find.
local function jstr(s)
  if not string.find(s, '[%z\1-\31"\\<>&\226]') then return '"' .. s .. '"' end
  local esc = {['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t',
    ['\b'] = '\\b', ['\f'] = '\\f', ['<'] = '\\u003c', ['>'] = '\\u003e', ['&'] = '\\u0026'}
  s = string.gsub(s, '[%z\1-\31"\\<>&]', function(c) return esc[c] or string.format('\\u%04x', string.byte(c)) end)
  s = string.gsub(s, '\226\128\168', '\\u2028')
  s = string.gsub(s, '\226\128\169', '\\u2029')
  return '"' .. s .. '"'
end
