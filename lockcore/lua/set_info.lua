-- Holder info, sent right behind the acquire on each connection, so it runs
-- after it and is stored only where the lock was set.
-- KEYS[1] lock, KEYS[2] holder info; ARGV[1] lock id, ARGV[2] info,
-- ARGV[3] ttl ms.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
end
return 0
