-- Leave a waiters' queue. KEYS[1] waiters, KEYS[2] deadlines; ARGV[1] id.
--- @include "queue"
return queue_leave(KEYS[1], KEYS[2], ARGV[1])
