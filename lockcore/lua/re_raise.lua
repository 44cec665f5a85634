-- A second-round proposal for a reentrant lock's first hold: the fence's
-- "set if greater", and where this attempt's own hold started the holds
-- here, the accepted proposal becomes the hold's token.
-- KEYS[1] fence, KEYS[2] holds; ARGV[1] proposal, ARGV[2] fence idle
-- expiry ms, ARGV[3] the attempt's hold.
--- @include "fence"
--- @include "holds"
local f = fence_get(KEYS[1])
if fence_raise(KEYS[1], f, ARGV[1], ARGV[2]) then
  if redis.call('HEXISTS', KEYS[2], ARGV[3]) == 1 then holds_token(KEYS[2], ARGV[1]) end
  return {1, ARGV[1]}
end
return {0, fence_str(f)}
