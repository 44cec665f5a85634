-- The fenced acquire of fencelock before fence buckets (as it composed and
-- sent it): a client of the old layout, for the upgrade tests. It reads
-- and writes only the resource's own fence key {key}:fence.
local function fence_get(fk)
  return tonumber(redis.call('GET', fk) or '0') or 0
end
local function fence_str(f)
  return string.format('%.0f', f)
end
local function fence_raise(fk, f, p, idle)
  if tonumber(p) > f then
    if idle ~= '0' then redis.call('SET', fk, p, 'PX', idle) else redis.call('SET', fk, p) end
    return true
  end
  return false
end
local function fence_within(p, ahead)
  if not ahead or ahead == '0' then return true end
  local t = redis.pcall('TIME')
  if t.err then return true end -- a user without TIME (an older ACL): no bound
  return tonumber(p) <= tonumber(t[1]) * 1000000 + tonumber(t[2]) + tonumber(ahead)
end
local function fence_keep(fk, token, fexp)
  if not fence_raise(fk, fence_get(fk), token, fexp) and fexp ~= '0' then
    local pt = redis.call('PTTL', fk)
    if pt >= 0 and pt < tonumber(fexp) then redis.call('PEXPIRE', fk, fexp) end
  end
end
local f = fence_get(KEYS[2])
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {0, 0, fence_str(f), redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1])}
end
if fence_within(ARGV[3], ARGV[5]) and fence_raise(KEYS[2], f, ARGV[3], ARGV[4]) then
  return {1, 1, ARGV[3]}
end
return {1, 0, fence_str(f)}
