-- KEYS[1] lock, KEYS[2] fence, KEYS[3] info, KEYS[4] holds.
local n = 0
if redis.call('EXISTS', KEYS[1]) == 1 then n = tonumber(redis.call('HGET', KEYS[4], 'n') or '1') or 1 end
return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]),
        redis.call('GET', KEYS[2]) or '', redis.call('GET', KEYS[3]) or '', n}
