-- The plain status and the number of live holds, then the node's clock
-- in µs.
-- KEYS[1] lock, KEYS[2] fence, KEYS[3] info, KEYS[4] holds.
--- @include "clock"
--- @include "holds"
local n = 0
if holds_owner(KEYS[1], KEYS[4]) then n = holds_count(KEYS[4], node_ms()) end
return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]),
        redis.call('GET', KEYS[2]) or '', redis.call('GET', KEYS[3]) or '', n, node_us_str()}
