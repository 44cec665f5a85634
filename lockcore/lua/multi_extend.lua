-- Extend a set: only if every lock key of the set still holds the id, as
-- the plain extend does for one: TTLs only pushed out, never in.
-- KEYS: k lock, k fence, k holder info keys; ARGV[1] id, ARGV[2] ttl ms,
-- ARGV[3] fence expiry ms, ARGV[4] token.
--- @include "fence"
--- @include "ttl"
local k = #KEYS / 3
for i = 1, k do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end
end
for i = 1, k do
  push_out(KEYS[2 * k + i], ARGV[2])
  fence_keep(KEYS[k + i], ARGV[4], ARGV[3])
  push_out(KEYS[i], ARGV[2])
end
return 1
