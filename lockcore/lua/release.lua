-- Release (or roll back) a plain lock: see the block "release". Where the
-- resource is an election's on this node (its epoch key exists), a release
-- that held is a resignation, whatever the caller took the lock for: the
-- election's observers are told, as leader_resign.lua tells them (GET
-- and a PUBLISH that may fail: the plain lock's ACL rules have no
-- EXISTS, and a user without +publish loses only the notice).
-- KEYS[1] lock, KEYS[2] holder info, KEYS[3] waiters, KEYS[4] their
-- deadlines, KEYS[5] the mark, KEYS[6] the election's epoch key
-- ("{name}:epoch"; its channel is "{name}:leader"); ARGV[1] lock id,
-- ARGV[2] what to do, ARGV[3] the releaser's place in the queue (none:
-- the id's acquisition).
--- @include "release"
local held = release(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[3], ARGV[2])
if held == 1 and ARGV[2] ~= 'r' and redis.call('GET', KEYS[6]) then
  redis.pcall('PUBLISH', string.sub(KEYS[6], 1, -7) .. ':leader', '')
end
return held
