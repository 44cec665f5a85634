-- Read-only view for diagnostics: holder, remaining ms, fence value,
-- holder info, the number of waiters and the first 8 with their tickets
-- (16 elements: within lockcore's reply bounds), and the node's clock in
-- µs (to hold fence values against).
-- KEYS[1] lock, KEYS[2] the bucket's hash, KEYS[3] the old fence key,
-- KEYS[4] holder info, KEYS[5] waiters; ARGV[1] the bucket's field.
--- @include "fence"
--- @include "clock"
return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]),
        fence_str(fence_get(KEYS[2], ARGV[1], KEYS[3])), redis.call('GET', KEYS[4]) or '',
        redis.call('ZCARD', KEYS[5]), redis.call('ZRANGE', KEYS[5], 0, 7, 'WITHSCORES'), node_us_str()}
