-- KEYS as release, then KEYS[6] holds; ARGV as release.
--- @include "release"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  local n = tonumber(redis.call('HGET', KEYS[6], 'n') or '1') or 1
  if n > 1 then redis.call('HINCRBY', KEYS[6], 'n', -1); return 1 end
  redis.call('DEL', KEYS[6])
end
return release(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[2])
