-- A second-round proposal for a reentrant lock's first hold: the fence's
-- "set if greater". It counts as accepted only where this attempt's own
-- hold started the holds here, and there the proposal becomes the hold's
-- token: the majority that accepts the token is then a majority that keeps
-- it, which every later re-entry's majority meets (docs/lockcore.md). A
-- node whose acquire has not run yet (late, on a closed connection) raises
-- its fence but does not count.
-- KEYS[1] fence, KEYS[2] holds; ARGV[1] proposal, ARGV[2] fence idle
-- expiry ms, ARGV[3] the attempt's hold.
--- @include "fence"
--- @include "holds"
local f = fence_get(KEYS[1])
if not fence_raise(KEYS[1], f, ARGV[1], ARGV[2]) then return {0, fence_str(f)} end
if redis.call('HEXISTS', KEYS[2], ARGV[3]) == 0 then return {0, ARGV[1]} end
holds_token(KEYS[2], ARGV[1])
return {1, ARGV[1]}
