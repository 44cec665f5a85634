-- The release of a polling client without holder info: the classic
-- compare-and-delete and nothing else (every extra call here is Redis CPU
-- on every release; W2 measured it). KEYS[1] lock; ARGV[1] id.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
