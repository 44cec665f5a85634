-- Repair a resource's fence on this node (docs/fencing.md, "Repairing a
-- fence"): lower it to ARGV[1] (µs; '0': this node's own clock), only where
-- no lock of the resource is held and the fence is above that. The
-- resource's own key goes down to it; the bucket, which its other
-- resources share, only from a value far ahead of this node's clock (more
-- than ARGV[4] µs; '0': any value), which no grant within the bound on
-- proposals made: a value within it may be another resource's token.
-- Lowering a fence is the one step that may let a token go back: the
-- caller must know that no token above the new value will ever be used
-- again, for this resource or, where its bucket is lowered, any other of
-- the bucket.
-- An election's epoch key (leader_proclaim.lua), where it is above the
-- fence after the repair, goes down to that fence: the next leader's
-- epoch, a token above it, is then proclaimed again.
-- KEYS[1] lock, KEYS[2] the bucket's hash, KEYS[3] the old fence key,
-- KEYS[4] the election's epoch key;
-- ARGV[1] the new value, ARGV[2] '-' (the old key goes where the bucket
-- covers the new value) or the old key's idle expiry ms in transition
-- mode ('0': none), ARGV[3] the bucket's field, ARGV[4] the bound.
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
local b = tonumber(redis.call('HGET', KEYS[2], ARGV[3]) or '0') or 0
if b > to and (ARGV[4] == '0' or b > tonumber(now) + tonumber(ARGV[4])) then
  b = to
  redis.call('HSET', KEYS[2], ARGV[3], fence_str(to))
end
-- The resource's own value: the new one, unless its bucket covers it.
local own = to > b and to or 0
if ARGV[2] ~= '-' then own = math.max(to, b) end -- clients of the old layout read only this key
if own == 0 then
  redis.call('DEL', KEYS[3])
elseif ARGV[2] ~= '-' and ARGV[2] ~= '0' then
  redis.call('SET', KEYS[3], fence_str(own), 'PX', ARGV[2])
else
  redis.call('SET', KEYS[3], fence_str(own))
end
local after = math.max(b, own)
local e = redis.call('GET', KEYS[4])
if e and (tonumber(e) or 0) > after then redis.call('SET', KEYS[4], fence_str(after)) end
return {after < f and 1 or 0, fence_str(f), fence_str(after), '', now}
