-- A leader proclaims its epoch and value, or keeps its lock alive: an
-- extension of its lock (block "extend") that, for a proclamation, also
-- sets the holder info to "<epoch> <value>" and tells the election's
-- observers. Only where the lock holds the leader's id, and only where no
-- greater epoch was ever proclaimed on this node for the election: each
-- node keeps the greatest in the election's epoch key (set if greater,
-- no expiry; lowered only by a repair of the fence). A late lock step of a
-- leader that resigned can set its id again on a node whose lock was
-- released since (by the next leaders); the epoch key keeps its late
-- proclamation, and any extension of it, from taking that node
-- (docs/election.md, "Ghosts"). The info's TTL is only pushed out (to the
-- lock's). Epoch '0' keeps the one the node has (a leader known by its
-- id alone, as through fencelockd): a node without it is not extended.
-- Returns 1 where it extended, else 0.
-- KEYS as the block "extend": lock, the bucket's hash, the old fence key,
-- holder info; KEYS[5] the epoch key. ARGV[1..6] as "extend"; ARGV[7] the
-- epoch, ARGV[8] the value, ARGV[9] the observers' channel ('': keep the
-- lock alive only, the info as it is).
--- @include "extend"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local epoch = ARGV[7]
if epoch == '0' then
  epoch = string.match(redis.call('GET', KEYS[4]) or '', '^(%d+) ')
  if not epoch then return 0 end
end
local last = tonumber(redis.call('GET', KEYS[5]) or '0') or 0
local e = tonumber(epoch)
if e < last then return 0 end
extend(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
if e > last then redis.call('SET', KEYS[5], epoch) end
if ARGV[9] == '' then return 1 end
local info = epoch .. ' ' .. ARGV[8]
local ttl = math.max(redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[4]))
redis.call('SET', KEYS[4], info, 'PX', ttl)
redis.call('PUBLISH', ARGV[9], info)
return 1
