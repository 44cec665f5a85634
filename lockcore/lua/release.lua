-- Release (or roll back) a plain lock: see the block "release".
-- KEYS[1] lock, KEYS[2] holder info, KEYS[3] waiters, KEYS[4] their
-- deadlines, KEYS[5] the mark; ARGV[1] lock id, ARGV[2] what to do,
-- ARGV[3] the releaser's place in the queue (none: the id's acquisition).
--- @include "release"
return release(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[3], ARGV[2])
