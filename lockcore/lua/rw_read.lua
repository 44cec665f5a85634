-- A reader of the read-write lock: refused while a writer holds the lock
-- or has declared that it waits; else registered as its own member of the
-- readers' set, scored by its expiry on this node's clock. The set's TTL
-- is only pushed out (it must outlive every live reader).
-- KEYS[1] lock, KEYS[2] the bucket's hash, KEYS[3] the old fence key,
-- KEYS[4] readers, KEYS[5] intent; ARGV[1] id, ARGV[2] ttl ms, ARGV[3] the
-- bucket's field. Replies as the fenced acquire, "accepted" when granted
-- (a reader proposes nothing: its token is chosen by the client).
--- @include "fence"
--- @include "clock"
--- @include "ttl"
local fs = fence_str(fence_get(KEYS[2], ARGV[3], KEYS[3]))
local h = redis.call('GET', KEYS[1])
if h then return {0, 0, fs, h, redis.call('PTTL', KEYS[1])} end
local w = redis.call('GET', KEYS[5])
if w then return {0, 0, fs, w, redis.call('PTTL', KEYS[5])} end
redis.call('ZADD', KEYS[4], node_ms() + tonumber(ARGV[2]), ARGV[1])
push_out(KEYS[4], ARGV[2])
return {1, 1, fs}
