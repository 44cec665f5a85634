-- The multi-resource lock's acquire: the whole set or none of it on this
-- node. Refused if any lock key of the set is held; else every key is set,
-- and the proposal is stored in every member's fence if it is greater than
-- all of them (so each resource's fence only grows).
-- KEYS: k lock keys, k old fence keys, k bucket hashes (one per member,
-- repeated where members share one); ARGV[1] id, ARGV[2] ttl ms, ARGV[3]
-- proposal, ARGV[4] '-' or the old fence keys' idle expiry ms (block
-- "fence"), ARGV[5] how far ahead of the node's clock a proposal may be,
-- µs, ARGV[5 + i] member i's bucket field.
-- Replies as the fenced acquire, the fence being the largest of the set.
--- @include "fence"
--- @include "fence_set"
local k = #KEYS / 3
local f, o = fence_set_get(k, k, 2 * k, 5)
for i = 1, k do
  local h = redis.call('GET', KEYS[i])
  if h then return {0, 0, fence_str(f), h, redis.call('PTTL', KEYS[i])} end
end
for i = 1, k do redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) end
if fence_set_raise(k, k, 2 * k, 5, f, o, ARGV[3], ARGV[4], ARGV[5], true) then
  return {1, 1, ARGV[3]}
end
return {1, 0, fence_str(f)}
