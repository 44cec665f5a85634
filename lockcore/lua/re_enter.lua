-- A re-entry: one more hold of the owner that holds the live hold ARGV[1].
-- Only where the lock key is held by that owner and that hold is live here
-- is the new hold added (its own field, until now + ttl; the key and the
-- holds pushed out to at least that, never in). It never takes a free key:
-- a re-entry is granted by a majority of nodes that re-entered, or not at
-- all (docs/lockcore.md, "Reentrant lock").
-- KEYS[1] lock, KEYS[2] the bucket's hash, KEYS[3] the old fence key,
-- KEYS[4] holds; ARGV[1] the hold to join, ARGV[2] the new hold (this
-- attempt's lock id), ARGV[3] ttl ms, ARGV[4] the bucket's field.
-- Re-entered: {1, 0, '0', '', -1, token, owner}; else refused as the
-- fenced acquire is ({0, 0, fence, holder, pttl}).
--- @include "fence"
--- @include "clock"
--- @include "holds"
local now = node_ms()
local o = holds_owner(KEYS[1], KEYS[4])
if o and holds_live(KEYS[4], ARGV[1], now) then
  holds_put(KEYS[1], KEYS[4], ARGV[2], tonumber(ARGV[3]), now)
  return {1, 0, '0', '', -1, redis.call('HGET', KEYS[4], 't') or '0', o}
end
local v = redis.call('GET', KEYS[1])
return {0, 0, fence_str(fence_get(KEYS[2], ARGV[4], KEYS[3])), v or '', redis.call('PTTL', KEYS[1])}
