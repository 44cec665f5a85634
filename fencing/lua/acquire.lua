-- The fenced acquire, atomically on one node: set the lock, then propose a
-- token, with no other client's step in between.
-- KEYS[1] lock, KEYS[2] the bucket's hash, KEYS[3] the resource's old fence
-- key; ARGV[1] lock id, ARGV[2] ttl ms, ARGV[3] proposal, ARGV[4] '-' or
-- (transition mode) the old fence key's idle expiry ms ('0': none),
-- ARGV[5] how far ahead of the node's clock the proposal may be, µs ('0':
-- no bound), ARGV[6] the bucket's field.
-- Returns {granted, accepted, fence after the call}; when refused, two
-- more: the holder (the lock key's value) and its PTTL.
--- @include "fence"
local f, o = fence_get(KEYS[2], ARGV[6], KEYS[3])
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {0, 0, fence_str(f), redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1])}
end
if fence_raise(KEYS[2], ARGV[6], KEYS[3], f, o, ARGV[3], ARGV[4], ARGV[5], true) then
  return {1, 1, ARGV[3]}
end
return {1, 0, fence_str(f)}
