-- Extend a plain lock: PEXPIRE only where the key holds our id (its one
-- holder sets its own TTL), with the holder info, and the fence step of an
-- extension (block "fence_keep").
-- KEYS[1] lock, KEYS[2] fence, KEYS[3] holder info; ARGV[1] lock id,
-- ARGV[2] ttl ms, ARGV[3] fence expiry ms ('0': never), ARGV[4] the lock's
-- token ('0': unknown or plain Redlock).
--- @include "fence"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[3], ARGV[2])
fence_keep(KEYS[2], ARGV[4], ARGV[3])
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
