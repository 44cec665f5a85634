-- Extend a plain lock: see the block "extend". Where the resource is an
-- election's on this node (its epoch key exists; read with GET, which the
-- plain lock's ACL rules allow), the extension is a
-- leader's keep-alive, whatever the caller took the lock for: it acts only
-- where a leader's extension may (block "leader_may"), so that a lock id
-- of a leader that resigned, extended as a plain lock's, cannot keep a
-- late lock step of it alive (docs/election.md, "Ghosts").
-- KEYS[1] lock, KEYS[2] the bucket's hash, KEYS[3] the old fence key,
-- KEYS[4] holder info, KEYS[5] the election's epoch key; ARGV[1] lock id,
-- ARGV[2] ttl ms, ARGV[3] '-' or the old fence key's expiry ms (block
-- "fence"), ARGV[4] the lock's token ('0': unknown or plain Redlock),
-- ARGV[5] the bucket's field, ARGV[6] how far ahead of the node's clock a
-- token may go into the bucket (fence_keep).
--- @include "extend"
--- @include "leader_may"
if redis.call('GET', KEYS[5]) and not leader_may(KEYS[1], KEYS[4], KEYS[5], ARGV[1], ARGV[4]) then
  return 0
end
return extend(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
