-- Release (or roll back) a set: the block "release" for each member, so
-- that each member's first waiter is told and reserved for, as by a plain
-- release. KEYS: k lock, k info, k waiters, k deadlines, k marks;
-- ARGV[1] id, ARGV[2] what to do, ARGV[3] the place in the queues. 1 if any key of the set held the id.
--- @include "release"
local k = #KEYS / 5
local n = 0
for i = 1, k do
  n = n + release(KEYS[i], KEYS[k + i], KEYS[2 * k + i], KEYS[3 * k + i], KEYS[4 * k + i], ARGV[1], ARGV[3], ARGV[2])
end
if n > 0 then return 1 end
return 0
