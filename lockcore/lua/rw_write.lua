-- The writer of the read-write lock: refused while the lock is held or a
-- live reader is registered (then it declares that it waits, unless
-- another writer already did); else the fenced acquire, and its own intent
-- is done. The intent names the writer's acquisition (ARGV[5]), which
-- stays the same over its attempts, each with a lock id of its own.
-- KEYS[1] lock, KEYS[2] the bucket's hash, KEYS[3] the old fence key,
-- KEYS[4] readers, KEYS[5] intent; ARGV[1] id, ARGV[2] ttl ms, ARGV[3]
-- proposal, ARGV[4] '-' or the old fence key's idle expiry ms (block
-- "fence"), ARGV[5] the acquisition's id, ARGV[6] how far ahead of the
-- node's clock a proposal may be, µs, ARGV[7] the bucket's field.
--- @include "fence"
--- @include "clock"
local f, o = fence_get(KEYS[2], ARGV[7], KEYS[3])
local fs = fence_str(f)
local h = redis.call('GET', KEYS[1])
if h then return {0, 0, fs, h, redis.call('PTTL', KEYS[1])} end
local now = node_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
local r = redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')
if r[1] then
  local w = redis.call('GET', KEYS[5])
  if not w or w == ARGV[5] then redis.call('SET', KEYS[5], ARGV[5], 'PX', ARGV[2]) end
  return {0, 0, fs, r[1], tonumber(r[2]) - now}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if redis.call('GET', KEYS[5]) == ARGV[5] then redis.call('DEL', KEYS[5]) end
if fence_raise(KEYS[2], ARGV[7], KEYS[3], f, o, ARGV[3], ARGV[4], ARGV[6], true, now) then return {1, 1, ARGV[3]} end
return {1, 0, fs}
