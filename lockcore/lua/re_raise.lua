-- A second-round proposal for a reentrant lock's first hold: the fence's
-- "set if greater". It counts as accepted only where this attempt's own
-- hold started the holds here, and there the proposal becomes the hold's
-- token: the majority that accepts the token is then a majority that keeps
-- it, which every later re-entry's majority meets (docs/lockcore.md). A
-- node whose acquire has not run yet (late, on a closed connection) raises
-- its fence but does not count.
-- KEYS[1] the bucket's hash, KEYS[2] the old fence key, KEYS[3] holds;
-- ARGV[1] proposal, ARGV[2] '-' or the old fence key's idle expiry ms
-- (block "fence"), ARGV[3] the attempt's hold, ARGV[4] the bucket's field,
-- ARGV[5] how far ahead of the node's clock a proposal may go into the
-- bucket (fence_raise).
--- @include "fence"
--- @include "holds"
local f, o = fence_get(KEYS[1], ARGV[4], KEYS[2])
if not fence_raise(KEYS[1], ARGV[4], KEYS[2], f, o, ARGV[1], ARGV[2], ARGV[5]) then return {0, fence_str(f)} end
if redis.call('HEXISTS', KEYS[3], ARGV[3]) == 0 then return {0, ARGV[1]} end
holds_token(KEYS[3], ARGV[1])
return {1, ARGV[1]}
