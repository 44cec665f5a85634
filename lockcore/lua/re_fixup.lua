-- KEYS[1] lock, KEYS[2] holds; ARGV[1] id, ARGV[2] count, ARGV[3] token.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[2], 'n', ARGV[2], 't', ARGV[3])
return redis.call('PEXPIRE', KEYS[2], redis.call('PTTL', KEYS[1]))
