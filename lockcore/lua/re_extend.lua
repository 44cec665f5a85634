-- KEYS[1] lock, KEYS[2] fence, KEYS[3] info, KEYS[4] holds; ARGV as extend.
--- @include "fence"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[3], ARGV[2])
redis.call('PEXPIRE', KEYS[4], ARGV[2])
fence_keep(KEYS[2], ARGV[4], ARGV[3])
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
