-- A waiting writer of the read-write lock: refused while a live reader is
-- registered (it then declares that it waits, unless another writer did,
-- and takes its place: the last reader's release names it), else as the
-- waiter's acquire of the key (block "queued"), and granted its own intent
-- is done. KEYS[1] lock, KEYS[2] the bucket's hash, KEYS[3] the old fence
-- key, KEYS[4] readers, KEYS[5] intent, KEYS[6] waiters, KEYS[7]
-- deadlines, KEYS[8] mark; ARGV[1] id, ARGV[2] ttl ms, ARGV[3] proposal,
-- ARGV[4] '-' or the old fence key's idle expiry ms (block "fence"),
-- ARGV[5] ticket, ARGV[6] queue ttl ms, ARGV[7] mode, ARGV[8] the
-- acquisition's id, ARGV[9] how far ahead of the node's clock a proposal
-- may be, µs, ARGV[10] the bucket's field. Replies as rw_write.lua, with
-- the head of the queue.
--- @include "fence"
--- @include "queued"
local qid = ARGV[8]
local f, o = fence_get(KEYS[2], ARGV[10], KEYS[3])
local fs = fence_str(f)
local now = node_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
local r = redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')
if r[1] then
  local w = redis.call('GET', KEYS[5])
  if not w or w == qid then redis.call('SET', KEYS[5], qid, 'PX', ARGV[2]) end
  local head = queue_take(KEYS[6], KEYS[7], KEYS[8], qid, ARGV[5], ARGV[6], now)
  return {0, 0, fs, r[1], tonumber(r[2]) - now, head}
end
local granted, _, head = queued_try(1, {KEYS[1]}, {KEYS[6]}, {KEYS[7]}, {KEYS[8]}, ARGV[1], ARGV[2], ARGV[5],
  ARGV[6], ARGV[7], qid, false)
if not granted then
  return {0, 0, fs, redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]), head}
end
if redis.call('GET', KEYS[5]) == qid then redis.call('DEL', KEYS[5]) end
if fence_raise(KEYS[2], ARGV[10], KEYS[3], f, o, ARGV[3], ARGV[4], ARGV[9], true, now) then return {1, 1, ARGV[3]} end
return {1, 0, fs}
