-- The multi-resource lock's acquire: the whole set or none of it on this
-- node. Refused if any lock key of the set is held; else every key is set,
-- and the proposal is stored in every fence key if it is greater than all
-- of them (so each resource's fence only grows).
-- KEYS: k lock keys, then k fence keys; ARGV[1] id, ARGV[2] ttl ms,
-- ARGV[3] proposal, ARGV[4] fence idle expiry ms ('0': none), ARGV[5] how
-- far ahead of the node's clock a proposal may be, µs.
-- Replies as the fenced acquire, the fence being the largest of the set.
--- @include "fence"
local k = #KEYS / 2
local f = 0
for i = 1, k do f = math.max(f, fence_get(KEYS[k + i])) end
for i = 1, k do
  local h = redis.call('GET', KEYS[i])
  if h then return {0, 0, fence_str(f), h, redis.call('PTTL', KEYS[i])} end
end
for i = 1, k do redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) end
local acc = false
if fence_within(ARGV[3], ARGV[5]) then
  for i = 1, k do acc = fence_raise(KEYS[k + i], f, ARGV[3], ARGV[4]) end
end
if acc then return {1, 1, ARGV[3]} end
return {1, 0, fence_str(f)}
