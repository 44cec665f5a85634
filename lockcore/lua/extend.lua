-- Extend a plain lock: see the block "extend".
-- KEYS[1] lock, KEYS[2] the bucket's hash, KEYS[3] the old fence key,
-- KEYS[4] holder info; ARGV[1] lock id, ARGV[2] ttl ms, ARGV[3] '-' or the
-- old fence key's expiry ms (block "fence"), ARGV[4] the lock's token
-- ('0': unknown or plain Redlock), ARGV[5] the bucket's field, ARGV[6]
-- how far ahead of the node's clock a token may go into the bucket
-- (fence_keep).
--- @include "extend"
return extend(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
