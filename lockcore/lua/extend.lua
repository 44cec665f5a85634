-- Extend a plain lock, only where the key holds our id: its TTL (and the
-- holder info's) is pushed out to at least ttl, never in, so that an older
-- extension that reaches a node late (with a shorter TTL) cannot undo a
-- newer one; and the fence step of an extension (block "fence_keep").
-- KEYS[1] lock, KEYS[2] the bucket's hash, KEYS[3] the old fence key,
-- KEYS[4] holder info; ARGV[1] lock id, ARGV[2] ttl ms, ARGV[3] '-' or the
-- old fence key's expiry ms (block "fence"), ARGV[4] the lock's token
-- ('0': unknown or plain Redlock), ARGV[5] the bucket's field, ARGV[6]
-- how far ahead of the node's clock a token may go into the bucket
-- (fence_keep).
--- @include "fence"
--- @include "ttl"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
push_out(KEYS[4], ARGV[2])
fence_keep(KEYS[2], ARGV[5], KEYS[3], ARGV[4], ARGV[3], ARGV[6])
push_out(KEYS[1], ARGV[2])
return 1
