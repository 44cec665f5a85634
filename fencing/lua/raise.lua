-- A second-round proposal: "set if greater" on the resource's fence alone.
-- KEYS[1] the bucket's hash, KEYS[2] the resource's old fence key;
-- ARGV[1] proposal, ARGV[2] as the acquire's ARGV[4], ARGV[3] the bucket's
-- field, ARGV[4] as the acquire's ARGV[5]: a proposal further ahead of the
-- node's clock is kept in the resource's own key, not in the bucket
-- (fence_raise). Returns {accepted, fence after the call}.
--- @include "fence"
local f, o = fence_get(KEYS[1], ARGV[3], KEYS[2])
if fence_raise(KEYS[1], ARGV[3], KEYS[2], f, o, ARGV[1], ARGV[2], ARGV[4]) then return {1, ARGV[1]} end
return {0, fence_str(f)}
