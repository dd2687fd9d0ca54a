-- json.lua: encoding strings as Go's encoding/json does, so that records
-- written by scripts are byte for byte those package state writes.
local JESC -- built on the first string that needs escaping
local function jesc(c)
  JESC = JESC or {['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t',
    ['\b'] = '\\b', ['\f'] = '\\f', ['<'] = '\\u003c', ['>'] = '\\u003e', ['&'] = '\\u0026'}
  return JESC[c] or string.format('\\u%04x', string.byte(c))
end
local function jstr(s)
  s = string.gsub(s, '[%z\1-\31"\\<>&]', jesc)
  s = string.gsub(s, '\226\128\168', '\\u2028')
  s = string.gsub(s, '\226\128\169', '\\u2029')
  return '"' .. s .. '"'
end
