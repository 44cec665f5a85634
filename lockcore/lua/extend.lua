-- Extend a plain lock, only where the key holds our id: its TTL (and the
-- holder info's) is pushed out to at least ttl, never in, so that an older
-- extension that reaches a node late (with a shorter TTL) cannot undo a
-- newer one; and the fence step of an extension (block "fence_keep").
-- KEYS[1] lock, KEYS[2] fence, KEYS[3] holder info; ARGV[1] lock id,
-- ARGV[2] ttl ms, ARGV[3] fence expiry ms ('0': never), ARGV[4] the lock's
-- token ('0': unknown or plain Redlock).
--- @include "fence"
--- @include "ttl"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
push_out(KEYS[3], ARGV[2])
fence_keep(KEYS[2], ARGV[4], ARGV[3])
push_out(KEYS[1], ARGV[2])
return 1
