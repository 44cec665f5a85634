-- May an extension of a leader's lock act on this node? Only where lock
-- holds id and the leader's epoch is not below the greatest proclaimed on
-- this node for the election (ekey: set if greater, no expiry; lowered only
-- by a repair of the fence). epoch '0' takes the one in the holder info (a
-- leader known by its id alone): a node without it is not extended.
-- Returns the epoch (a string) and the greatest so far (a number), or nil.
local function leader_may(lock, info, ekey, id, epoch)
  if redis.call('GET', lock) ~= id then return nil end
  if epoch == '0' then
    epoch = string.match(redis.call('GET', info) or '', '^(%d+) ')
    if not epoch then return nil end
  end
  local last = tonumber(redis.call('GET', ekey) or '0') or 0
  if tonumber(epoch) < last then return nil end
  return epoch, last
end
