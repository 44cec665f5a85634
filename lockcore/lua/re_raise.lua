-- KEYS[1] fence, KEYS[2] lock, KEYS[3] holds; ARGV[1] proposal,
-- ARGV[2] idle expiry ms, ARGV[3] id.
--- @include "fence"
local f = fence_get(KEYS[1])
if fence_raise(KEYS[1], f, ARGV[1], ARGV[2]) then
  if redis.call('GET', KEYS[2]) == ARGV[3] then redis.call('HSET', KEYS[3], 't', ARGV[1]) end
  return {1, ARGV[1]}
end
return {0, fence_str(f)}
