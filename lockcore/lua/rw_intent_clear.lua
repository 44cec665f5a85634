-- A writer that gives up ends its intent. KEYS[1] intent; ARGV[1] id.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
