-- The extension of a lock key, shared by the plain lock's extension and a
-- leader's proclamation: only where lock holds id, its TTL and the holder
-- info's are pushed out to at least ttl, never in, so that an older
-- extension that reaches a node late (with a shorter TTL) cannot undo a
-- newer one; and the fence step of an extension (block "fence_keep").
-- fhash, field: the fence's bucket; fkey the old fence key, fexp '-' or
-- its expiry ms; tok the lock's token ('0': unknown or plain Redlock);
-- ahead how far ahead of the node's clock a token may go into the bucket.
-- Returns 1 where lock held id, else 0.
--- @include "fence"
--- @include "ttl"
local function extend(lock, fhash, fkey, info, id, ttl, fexp, tok, field, ahead)
  if redis.call('GET', lock) ~= id then return 0 end
  push_out(info, ttl)
  fence_keep(fhash, field, fkey, tok, fexp, ahead)
  push_out(lock, ttl)
  return 1
end
