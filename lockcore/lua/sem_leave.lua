-- A semaphore's waiting driver is done (granted or given up): it leaves
-- the line, and hands back every permit a release kept for it that it did
-- not take (two releases at once both name the head, which takes one):
-- each goes to the next waiter as the release would have given it
-- (block "queue_name"), so that waiter does not sleep until its refresh
-- with a permit free. A driver that was first in line wakes the next:
-- permits that came free without a release (their holders died) go down
-- the line one round trip apart, not one refresh apart, and a permit kept
-- for a driver that gave up before it heard of it is found by the next
-- when that reservation ends. KEYS[1] waiters, KEYS[2] deadlines, KEYS[3]
-- mark, KEYS[4..] the permits it was named for and did not take; ARGV[1]
-- its id, ARGV[2] what a release does (release.lua).
--- @include "clock"
--- @include "queue_name"
local now = node_ms()
local first = queue_live_head(KEYS[1], KEYS[2], now) == ARGV[1]
queue_leave(KEYS[1], KEYS[2], ARGV[1])
local named = false
for i = 4, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
    if ARGV[2] ~= '' then
      queue_name(KEYS[i], KEYS[1], KEYS[2], KEYS[3], ARGV[2])
      named = true
    end
  end
end
if first and ARGV[2] ~= '' and not named then queue_wake(KEYS[1], KEYS[2], now) end
if redis.call('ZCARD', KEYS[1]) == 0 then redis.call('DEL', KEYS[3]) end
return 1
