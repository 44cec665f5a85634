-- Release (or roll back) one hold: its own field goes; where no live hold
-- of the owner is left, the key goes too, by the block "release" (which
-- tells the first waiter, or for a rollback only deletes; the owner's id
-- is also its place in the queue, which it leaves). A hold that is
-- not here (never added, or gone already) changes nothing but, for a
-- release, the releaser's place in the queue.
-- KEYS[1] lock, KEYS[2] holder info, KEYS[3] waiters, KEYS[4] deadlines,
-- KEYS[5] mark, KEYS[6] holds; ARGV[1] the hold, ARGV[2] what to do (as
-- release), ARGV[3] the releaser's place in the queue.
--- @include "clock"
--- @include "holds"
--- @include "queue"
--- @include "release"
local o = holds_owner(KEYS[1], KEYS[6])
if not o or redis.call('HDEL', KEYS[6], ARGV[1]) == 0 then
  if ARGV[2] ~= 'r' and redis.call('ZCARD', KEYS[3]) > 0 then queue_leave(KEYS[3], KEYS[4], ARGV[3]) end
  return 0
end
if holds_count(KEYS[6], node_ms()) > 0 then return 1 end
redis.call('DEL', KEYS[6])
return release(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], o, o, ARGV[2])
