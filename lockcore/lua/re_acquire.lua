-- KEYS[1] lock, KEYS[2] fence, KEYS[3] holds; ARGV[1] id, ARGV[2] ttl,
-- ARGV[3] proposal, ARGV[4] fence idle expiry ms.
--- @include "fence"
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  local n = redis.call('HINCRBY', KEYS[3], 'n', 1)
  if n == 1 then n = 2; redis.call('HSET', KEYS[3], 'n', 2) end
  local pt = redis.call('PTTL', KEYS[1])
  local ttl = tonumber(ARGV[2])
  if pt < ttl then redis.call('PEXPIRE', KEYS[1], ARGV[2]); pt = ttl end
  redis.call('PEXPIRE', KEYS[3], pt)
  return {1, 0, '0', '', -1, 1, redis.call('HGET', KEYS[3], 't') or '0', n}
end
local f = fence_get(KEYS[2])
if v then return {0, 0, fence_str(f), v, redis.call('PTTL', KEYS[1])} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local t = '0'
local fs = fence_str(f)
if fence_raise(KEYS[2], f, ARGV[3], ARGV[4]) then
  t = ARGV[3]
  fs = ARGV[3]
end
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], 'n', 1, 't', t)
redis.call('PEXPIRE', KEYS[3], ARGV[2])
if t == '0' then return {1, 0, fs} end
return {1, 1, fs}
