-- A TTL on state that others may rely on is only ever pushed out: set key
-- to expire in ms unless it already lives longer (a key without expiry
-- gets one; a missing key stays missing).
local function push_out(key, ms)
  if redis.call('PTTL', key) < tonumber(ms) then redis.call('PEXPIRE', key, ms) end
end
