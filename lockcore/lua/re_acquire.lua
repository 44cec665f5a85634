-- The first hold of a reentrant lock: the fenced acquire, with the lock
-- key set to the owner's id and the holds started with this hold.
-- KEYS[1] lock, KEYS[2] the bucket's hash, KEYS[3] the old fence key,
-- KEYS[4] holds; ARGV[1] owner, ARGV[2] hold (this attempt's lock id),
-- ARGV[3] ttl ms, ARGV[4] proposal, ARGV[5] '-' or the old fence key's idle
-- expiry ms (block "fence"), ARGV[6] how far ahead of the node's clock a
-- proposal may be, µs, ARGV[7] the bucket's field. Replies as the fenced
-- acquire.
--- @include "fence"
--- @include "clock"
--- @include "holds"
local f, o = fence_get(KEYS[2], ARGV[7], KEYS[3])
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[3]) then
  return {0, 0, fence_str(f), redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1])}
end
local now = node_ms() -- one clock read for the bound and the hold
local acc = fence_raise(KEYS[2], ARGV[7], KEYS[3], f, o, ARGV[4], ARGV[5], ARGV[6], true, now)
holds_new(KEYS[4], ARGV[1], ARGV[2], acc and ARGV[4] or '0', tonumber(ARGV[3]), now)
if acc then return {1, 1, ARGV[4]} end
return {1, 0, fence_str(f)}
