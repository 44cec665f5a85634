-- Read-only view for diagnostics: holder, remaining ms, fence value,
-- holder info, the number of waiters and the first 8 with their tickets
-- (16 elements: within lockcore's reply bounds), and the node's clock in
-- µs (to hold fence values against).
-- KEYS[1] lock, KEYS[2] fence, KEYS[3] holder info, KEYS[4] waiters.
--- @include "clock"
return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]),
        redis.call('GET', KEYS[2]) or '', redis.call('GET', KEYS[3]) or '',
        redis.call('ZCARD', KEYS[4]), redis.call('ZRANGE', KEYS[4], 0, 7, 'WITHSCORES'), node_us_str()}
