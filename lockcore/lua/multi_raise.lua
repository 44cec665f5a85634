-- A second-round proposal for a set: stored in every fence key of the set
-- if greater than all of them. KEYS: k fence keys; ARGV[1] proposal,
-- ARGV[2] fence idle expiry ms. Returns {accepted, largest fence after}.
--- @include "fence"
local f = 0
for i = 1, #KEYS do f = math.max(f, fence_get(KEYS[i])) end
local acc = false
for i = 1, #KEYS do acc = fence_raise(KEYS[i], f, ARGV[1], ARGV[2]) end
if acc then return {1, ARGV[1]} end
return {0, fence_str(f)}
