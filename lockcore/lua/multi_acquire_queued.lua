-- The acquire of a waiting set (the multi-resource lock waits in line):
-- the whole set or none of it, by the block "queued" over the members'
-- keys and queues: a member is free, or reserved for this acquisition by a
-- release of that member; refused, the waiter takes or refreshes its place
-- in every member's queue. Fence steps as multi_acquire.lua.
-- KEYS: k lock, k old fence, k waiters, k deadlines, k marks, k bucket
-- hashes; ARGV[1] id, ARGV[2] ttl, ARGV[3] proposal, ARGV[4] '-' or the
-- old fence keys' idle expiry, ARGV[5] ticket, ARGV[6] queue ttl ms,
-- ARGV[7] mode, ARGV[8] the acquisition's id, ARGV[9] how far ahead of the
-- node's clock a proposal may be, µs, ARGV[9 + i] member i's bucket field.
-- Returns {granted, accepted, fence, holder, holder pttl, head} (holder
-- and head of the first member that refused).
--- @include "fence"
--- @include "fence_set"
--- @include "queued"
local k = #KEYS / 6
local locks, qs, dls, marks = {}, {}, {}, {}
for i = 1, k do
  locks[i], qs[i], dls[i], marks[i] = KEYS[i], KEYS[2 * k + i], KEYS[3 * k + i], KEYS[4 * k + i]
end
local f, o = fence_set_get(k, k, 5 * k, 9)
local granted, b, head = queued_try(k, locks, qs, dls, marks, ARGV[1], ARGV[2], ARGV[5], ARGV[6], ARGV[7],
  ARGV[8], false)
if not granted then
  return {0, 0, fence_str(f), redis.call('GET', KEYS[b]) or '', redis.call('PTTL', KEYS[b]), head}
end
if fence_set_raise(k, k, 5 * k, 9, f, o, ARGV[3], ARGV[4], ARGV[9], true) then
  return {1, 1, ARGV[3]}
end
return {1, 0, fence_str(f)}
