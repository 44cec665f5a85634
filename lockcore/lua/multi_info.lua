-- Holder info for a set, behind its acquire on each connection.
-- KEYS: k lock, k info keys; ARGV[1] id, ARGV[2] info, ARGV[3] ttl ms.
local k = #KEYS / 2
for i = 1, k do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('SET', KEYS[k + i], ARGV[2], 'PX', ARGV[3])
  end
end
return 1
