-- A waiting set gives up: it leaves every member's queue.
-- KEYS: k waiters, k deadlines; ARGV[1] the acquisition's id.
--- @include "queue"
local k = #KEYS / 2
for i = 1, k do queue_leave(KEYS[i], KEYS[k + i], ARGV[1]) end
return 1
