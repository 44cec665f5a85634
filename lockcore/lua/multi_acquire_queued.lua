-- The acquire of a waiting set (the multi-resource lock waits in line):
-- the whole set or none of it, by the block "queued" over the members'
-- keys and queues: a member is free, or reserved for this acquisition by a
-- release of that member; refused, the waiter takes or refreshes its place
-- in every member's queue. Fence steps as multi_acquire.lua.
-- KEYS: k lock, k fence, k waiters, k deadlines, k marks; ARGV[1] id,
-- ARGV[2] ttl, ARGV[3] proposal, ARGV[4] fence idle, ARGV[5] ticket,
-- ARGV[6] queue ttl ms, ARGV[7] mode, ARGV[8] the acquisition's id,
-- ARGV[9] how far ahead of the node's clock a proposal may be, µs.
-- Returns {granted, accepted, fence, holder, holder pttl, head} (holder
-- and head of the first member that refused).
--- @include "fence"
--- @include "queued"
local k = #KEYS / 5
local locks, qs, dls, marks = {}, {}, {}, {}
for i = 1, k do
  locks[i], qs[i], dls[i], marks[i] = KEYS[i], KEYS[2 * k + i], KEYS[3 * k + i], KEYS[4 * k + i]
end
local f = 0
for i = 1, k do f = math.max(f, fence_get(KEYS[k + i])) end
local granted, b, head = queued_try(k, locks, qs, dls, marks, ARGV[1], ARGV[2], ARGV[5], ARGV[6], ARGV[7],
  ARGV[8], false)
if not granted then
  return {0, 0, fence_str(f), redis.call('GET', KEYS[b]) or '', redis.call('PTTL', KEYS[b]), head}
end
local acc = false
if fence_within(ARGV[3], ARGV[9]) then
  for i = 1, k do acc = fence_raise(KEYS[k + i], f, ARGV[3], ARGV[4]) end
end
if acc then return {1, 1, ARGV[3]} end
return {1, 0, fence_str(f)}
