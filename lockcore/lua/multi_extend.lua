-- Extend a set: only if every lock key of the set still holds the id, as
-- the plain extend does for one: TTLs only pushed out, never in.
-- KEYS: k lock, k old fence, k holder info keys, k bucket hashes; ARGV[1]
-- id, ARGV[2] ttl ms, ARGV[3] '-' or the old fence keys' expiry ms (block
-- "fence"), ARGV[4] token, ARGV[4 + i] member i's bucket field, and last
-- (ARGV[5 + k]) how far ahead of the node's clock a token may go into the
-- buckets (fence_keep).
--- @include "fence"
--- @include "ttl"
local k = #KEYS / 4
for i = 1, k do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end
end
for i = 1, k do
  push_out(KEYS[2 * k + i], ARGV[2])
  fence_keep(KEYS[3 * k + i], ARGV[4 + i], KEYS[k + i], ARGV[4], ARGV[3], ARGV[5 + k])
  push_out(KEYS[i], ARGV[2])
end
return 1
