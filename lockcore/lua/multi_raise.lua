-- A second-round proposal for a set: stored in every member's fence if
-- greater than all of them. KEYS: k old fence keys, k bucket hashes;
-- ARGV[1] proposal, ARGV[2] '-' or the old fence keys' idle expiry ms,
-- ARGV[2 + i] member i's bucket field, and last (ARGV[3 + k]) how far
-- ahead of the node's clock a proposal may go into the buckets
-- (fence_raise). Returns {accepted, largest fence after}.
--- @include "fence"
--- @include "fence_set"
local k = #KEYS / 2
local f, o = fence_set_get(k, 0, k, 2)
if fence_set_raise(k, 0, k, 2, f, o, ARGV[1], ARGV[2], ARGV[3 + k]) then return {1, ARGV[1]} end
return {0, fence_str(f)}
