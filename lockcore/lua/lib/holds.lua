-- The holds of a reentrant lock on this node, in the hash beside its key:
-- 'o' the owner (the lock key's value), 't' the hold's token ('0' where
-- this node accepted none), and one field per hold, named by the hold's
-- lock id, whose value is that hold's expiry on this node's clock (ms).
-- State is named per hold, never counted: a re-entry adds its own field,
-- a release removes its own, so a message that a node missed, or got
-- twice or late, changes nothing but that one hold. The key and the hash
-- live at least as long as the longest live hold: their TTLs are only
-- pushed out, whatever TTL a hold asks for.
--- @include "ttl"

-- The owner o's hash, if the lock key is held by o (else nil).
local function holds_owner(lock, holds)
  local o = redis.call('HGET', holds, 'o')
  if o and redis.call('GET', lock) == o then return o end
  return nil
end

-- Is hold h live (its expiry after now)?
local function holds_live(holds, h, now)
  return (tonumber(redis.call('HGET', holds, h) or '0') or 0) > now
end

-- How many holds are live.
local function holds_count(holds, now)
  local n = 0
  local all = redis.call('HGETALL', holds)
  for i = 1, #all, 2 do
    if all[i] ~= 'o' and all[i] ~= 't' and (tonumber(all[i + 1]) or 0) > now then n = n + 1 end
  end
  return n
end

-- Hold h lasts until at least now + ttl: its own expiry, like the key's
-- and the hash's TTLs, is only pushed out, so that an older extension that
-- reaches a node late (with a shorter TTL) cannot undo a newer one.
local function holds_put(lock, holds, h, ttl, now)
  if (tonumber(redis.call('HGET', holds, h)) or 0) < now + ttl then redis.call('HSET', holds, h, now + ttl) end
  push_out(lock, ttl)
  push_out(holds, ttl)
end

-- The first hold h of owner o, just granted here (the key was set with
-- ttl): the hash starts afresh, with the token t ('0' if none accepted).
local function holds_new(holds, o, h, t, ttl, now)
  redis.call('DEL', holds)
  redis.call('HSET', holds, 'o', o, 't', t, h, now + ttl)
  redis.call('PEXPIRE', holds, ttl)
end

-- The hold's token only grows, to the one a majority accepted.
local function holds_token(holds, token)
  if tonumber(token) > (tonumber(redis.call('HGET', holds, 't') or '0') or 0) then
    redis.call('HSET', holds, 't', token)
  end
end
