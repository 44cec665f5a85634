-- The plain status and the number of live holds, then the node's clock
-- in µs.
-- KEYS[1] lock, KEYS[2] the bucket's hash, KEYS[3] the old fence key,
-- KEYS[4] info, KEYS[5] holds; ARGV[1] the bucket's field.
--- @include "fence"
--- @include "clock"
--- @include "holds"
local n = 0
if holds_owner(KEYS[1], KEYS[5]) then n = holds_count(KEYS[5], node_ms()) end
return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]),
        fence_str(fence_get(KEYS[2], ARGV[1], KEYS[3])), redis.call('GET', KEYS[4]) or '', n, node_us_str()}
