-- A leader proclaims its epoch and value: an extension of its lock (block
-- "extend") that also sets the holder info to "<epoch> <value>" and tells
-- the election's observers. Only where the lock holds the leader's id, so
-- a late proclamation of a deposed leader changes nothing; the info's TTL
-- is only pushed out (to the lock's). Epoch '0' keeps the one the node has
-- (a leader known by its id alone, as through fencelockd): a node without
-- it is not proclaimed to. Returns 1 where it proclaimed, else 0.
-- KEYS as the block "extend": lock, the bucket's hash, the old fence key,
-- holder info; ARGV[1..6] as "extend"; ARGV[7] the epoch, ARGV[8] the
-- value, ARGV[9] the observers' channel.
--- @include "extend"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local epoch = ARGV[7]
if epoch == '0' then
  epoch = string.match(redis.call('GET', KEYS[4]) or '', '^(%d+) ')
  if not epoch then return 0 end
end
extend(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
local info = epoch .. ' ' .. ARGV[8]
local ttl = math.max(redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[4]))
redis.call('SET', KEYS[4], info, 'PX', ttl)
redis.call('PUBLISH', ARGV[9], info)
return 1
