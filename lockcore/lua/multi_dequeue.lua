-- A waiting set gives up: it leaves every member's queue (block
-- "queue_give_up": a member kept for it goes to that member's next
-- waiter). KEYS: k waiters, k deadlines, k locks, k marks; ARGV[1] the
-- acquisition's id, ARGV[2] what a release of its client does.
--- @include "queue_give_up"
local k = #KEYS / 4
for i = 1, k do
  queue_give_up(KEYS[2 * k + i], KEYS[i], KEYS[k + i], KEYS[3 * k + i], ARGV[1], ARGV[2])
end
return 1
