-- Extend a reader: only one still registered and not expired; its own
-- expiry and the set's TTL are only pushed out (ZADD GT), so that an older
-- extension that reaches a node late cannot undo a newer one.
-- KEYS[1] readers; ARGV[1] id, ARGV[2] ttl ms.
--- @include "clock"
--- @include "ttl"
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
local now = node_ms()
if not s or tonumber(s) <= now then return 0 end
redis.call('ZADD', KEYS[1], 'GT', now + tonumber(ARGV[2]), ARGV[1])
push_out(KEYS[1], ARGV[2])
return 1
