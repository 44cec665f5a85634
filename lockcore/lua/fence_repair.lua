-- Repair a resource's fence on this node (docs/fencing.md, "Repairing a
-- fence"): lower it to ARGV[1] (µs; '0': this node's own clock), only where
-- no lock of the resource is held and the fence is above that. Lowering a
-- fence is the one step that may let a token go back: the caller must know
-- that no token above the new value will ever be used again, for this
-- resource or any other of its bucket (they share the fence).
-- KEYS[1] lock, KEYS[2] the bucket's hash, KEYS[3] the old fence key;
-- ARGV[1] the new value, ARGV[2] '-' (the old key goes) or the old key's
-- idle expiry ms in transition mode ('0': none), ARGV[3] the bucket's
-- field.
-- Returns {lowered (0/1), fence before, fence after, the holder or '', the
-- node's clock in µs}.
--- @include "fence"
--- @include "clock"
local f = fence_get(KEYS[2], ARGV[3], KEYS[3])
local now = node_us_str()
local to = tonumber(ARGV[1])
if to == 0 then to = tonumber(now) end
local h = redis.call('GET', KEYS[1])
if h or to <= 0 or to >= f then return {0, fence_str(f), fence_str(f), h or '', now} end
redis.call('HSET', KEYS[2], ARGV[3], fence_str(to))
if ARGV[2] == '-' then
  redis.call('DEL', KEYS[3])
elseif ARGV[2] ~= '0' then
  redis.call('SET', KEYS[3], fence_str(to), 'PX', ARGV[2])
else
  redis.call('SET', KEYS[3], fence_str(to))
end
return {1, fence_str(f), fence_str(to), '', now}
