-- A waiting reader of the read-write lock (docs/lockcore.md, "Read-write
-- lock"; docs/fairness.md). Refused while a writer holds the key (a key
-- holding this reader's acquisition id is a reservation a release made
-- for it, not a writer) or while a writer has declared that it waits
-- (fair: one that is not in this line; one that is, is ordered by it);
-- fair, also unless it is the head of the queue. Refused, it
-- takes or refreshes its place. Admitted, it registers as a reader (its
-- own member, scored by its expiry), deletes the reservation made for it
-- (readers do not hold the key), leaves the queue (a reader keeps no
-- place: others may read beside it), and wakes the new head: a reader
-- there reads too, a writer finds the readers and waits for the last.
-- KEYS[1] lock, KEYS[2] the bucket's hash, KEYS[3] the old fence key,
-- KEYS[4] readers, KEYS[5] intent, KEYS[6] waiters, KEYS[7] deadlines,
-- KEYS[8] mark; ARGV[1] id, ARGV[2] ttl ms, ARGV[3] ticket, ARGV[4] queue
-- ttl ms, ARGV[5] mode, ARGV[6] the acquisition's id, ARGV[7] the bucket's
-- field. Replies as rw_read.lua, with the head of the queue.
--- @include "fence"
--- @include "clock"
--- @include "queue_take"
--- @include "ttl"
local qid, mode = ARGV[6], ARGV[5]
local fs = fence_str(fence_get(KEYS[2], ARGV[7], KEYS[3]))
local now = node_ms()
local h = redis.call('GET', KEYS[1])
local mine = mode ~= '2' and h == qid
local w = redis.call('GET', KEYS[5])
-- A declared writer keeps readers out; fair, one that waits in this line
-- is ordered by it instead (the head goes first), and only one that does
-- not (a polling writer) keeps them out.
local blocked = (h and not mine) or (w and not mine and (mode ~= '1' or not redis.call('ZSCORE', KEYS[6], w)))
local head
if blocked or mode == '1' then head = queue_take(KEYS[6], KEYS[7], KEYS[8], qid, ARGV[3], ARGV[4], now) end
if not blocked and mode == '1' and not mine and head ~= qid then blocked = true end
if blocked then
  if h then return {0, 0, fs, h, redis.call('PTTL', KEYS[1]), head} end
  if w then return {0, 0, fs, w, redis.call('PTTL', KEYS[5]), head} end
  return {0, 0, fs, '', -2, head}
end
redis.call('ZADD', KEYS[4], now + tonumber(ARGV[2]), ARGV[1])
push_out(KEYS[4], ARGV[2])
if mine then redis.call('DEL', KEYS[1]) end
if redis.call('ZCARD', KEYS[6]) > 0 then
  queue_leave(KEYS[6], KEYS[7], qid)
  queue_wake(KEYS[6], KEYS[7], now)
end
return {1, 1, fs}
