-- A leader proclaims its epoch and value: an extension of its lock (block
-- "extend") that also sets the holder info to them and tells the
-- election's observers. Only where the lock holds the leader's id, so a
-- late proclamation of a deposed leader changes nothing; the info's TTL is
-- only pushed out (to the lock's). Returns 1 where it held, else 0.
-- KEYS as the block "extend": lock, the bucket's hash, the old fence key,
-- holder info; ARGV[1..6] as "extend"; ARGV[7] the info ("<epoch>
-- <value>"), ARGV[8] the observers' channel.
--- @include "extend"
if extend(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]) == 0 then
  return 0
end
local ttl = math.max(redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[4]))
redis.call('SET', KEYS[4], ARGV[7], 'PX', ttl)
redis.call('PUBLISH', ARGV[8], ARGV[7])
return 1
