-- Extend a reader: only one still registered and not expired; its own
-- score is set, the set's TTL only pushed out.
-- KEYS[1] readers; ARGV[1] id, ARGV[2] ttl ms.
--- @include "clock"
--- @include "ttl"
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
local now = node_ms()
if not s or tonumber(s) <= now then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
push_out(KEYS[1], ARGV[2])
return 1
