-- The writer's release: the block "release", and a real release (not a
-- rollback: the writer is about to retry) also ends its intent, which
-- names the writer's acquisition (its place in the queue, ARGV[3]).
-- KEYS as release, then KEYS[6] the intent; ARGV as release.
--- @include "release"
if ARGV[2] ~= 'r' and redis.call('GET', KEYS[6]) == ARGV[3] then
  redis.call('DEL', KEYS[6])
end
return release(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[3], ARGV[2])
