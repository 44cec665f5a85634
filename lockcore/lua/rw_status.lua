-- The read-write lock's status: the plain one, the live readers' count,
-- the first 8 of them as {id, ms left} pairs (the soonest to expire first;
-- 16 elements, the most a node may send in one array), and the waiting
-- writer's id, then the node's clock in µs. Read-only (expired readers are
-- counted out, not removed).
-- KEYS[1] lock, KEYS[2] the bucket's hash, KEYS[3] the old fence key,
-- KEYS[4] info, KEYS[5] readers, KEYS[6] intent; ARGV[1] the bucket's
-- field.
--- @include "fence"
--- @include "clock"
local now = node_ms()
local r = redis.call('ZRANGEBYSCORE', KEYS[5], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 8)
local rd = {}
for i = 1, #r, 2 do
  rd[#rd + 1] = r[i]
  rd[#rd + 1] = math.floor(tonumber(r[i + 1]) - now)
end
return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]),
        fence_str(fence_get(KEYS[2], ARGV[1], KEYS[3])), redis.call('GET', KEYS[4]) or '',
        redis.call('ZCOUNT', KEYS[5], '(' .. now, '+inf'), rd, redis.call('GET', KEYS[6]) or '', node_us_str()}
