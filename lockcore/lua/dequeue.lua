-- A waiter gives up: it leaves the queue of its lock key (block
-- "queue_give_up"). KEYS[1] waiters, KEYS[2] deadlines, KEYS[3] the lock
-- key, KEYS[4] the mark, KEYS[5] (a reentrant lock) its holds; ARGV[1]
-- the acquisition's id, ARGV[2] what a release of its client does.
--- @include "queue_give_up"
queue_give_up(KEYS[3], KEYS[1], KEYS[2], KEYS[4], ARGV[1], ARGV[2], KEYS[5])
return 1
