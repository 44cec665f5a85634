-- A leader resigns: its lock's release (block "release", which names the
-- next live candidate in line and keeps the lock for it), then the
-- election's observers are told, where it held. Returns the release's
-- answer: 1 where the key held the id, else 0.
-- KEYS[1] lock, KEYS[2] holder info, KEYS[3] waiters, KEYS[4] their
-- deadlines, KEYS[5] the mark; ARGV[1] lock id, ARGV[2] what to do (as
-- release.lua's), ARGV[3] the observers' channel.
--- @include "release"
local held = release(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], nil, ARGV[2])
if held == 1 then redis.call('PUBLISH', ARGV[3], '') end
return held
