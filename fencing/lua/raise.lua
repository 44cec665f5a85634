-- A second-round proposal: "set if greater" on the fence alone.
-- KEYS[1] fence; ARGV[1] proposal, ARGV[2] fence idle expiry ms.
-- Returns {accepted, fence after the call}.
--- @include "fence"
local f = fence_get(KEYS[1])
if fence_raise(KEYS[1], f, ARGV[1], ARGV[2]) then return {1, ARGV[1]} end
return {0, fence_str(f)}
