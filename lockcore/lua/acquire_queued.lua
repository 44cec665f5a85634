-- The acquire of a waiter (docs/fairness.md). Its place in this node's
-- queue is the member ARGV[8], the acquisition's id, scored by its ticket,
-- with a deadline of its own; taking or refreshing it drops dead waiters
-- from the head and sets the mark that anyone waits. Every attempt sets
-- the key to its own value ARGV[1] (a plain lock: the attempt's lock id,
-- so that a late rollback of an earlier attempt can never delete it). A
-- lock key holding the acquisition's id is the reservation a release made
-- for it: the waiter takes it over, with a fresh TTL. (A reentrant lock's
-- key holds the owner, which is the acquisition's id: there, a key of its
-- own whose holds are the owner's is a leftover of an earlier attempt, not
-- a reservation, and is left alone: a late attempt must not wipe a later
-- one's holds.)
-- ARGV[7] = '2', a notified waiter's first attempt: SET NX PX, as a polling
--   client does; refused, it takes its place. Granted, it is in no queue,
--   so a lock nobody waits for costs what it costs a polling client.
-- ARGV[7] = '0', a notified waiter's later attempt: the lock first;
--   refused, the place is refreshed; granted, the place's deadline is cut
--   to the lock's TTL, so that a holder that dies is not first for long.
-- ARGV[7] = '1', fair: the place first, then the lock only as the head (or
--   where reserved for it: the release named it as the head).
-- The fence steps are the fenced acquire's (none with ARGV[3] = '0').
-- KEYS[1] lock, KEYS[2] fence, KEYS[3] waiters, KEYS[4] deadlines,
-- KEYS[5] the mark, KEYS[6] (a reentrant lock) its holds, which a grant
-- starts with the hold ARGV[9]; ARGV[1] the key's value, ARGV[2] ttl,
-- ARGV[3] proposal, ARGV[4] fence idle, ARGV[5] ticket, ARGV[6] queue ttl
-- ms, ARGV[7] as above, ARGV[8] the acquisition's id, ARGV[9] the hold.
-- Returns {granted, accepted, fence, holder, holder pttl, head}.
--- @include "fence"
--- @include "clock"
--- @include "queue_take"
--- @include "holds"
local qid, mode = ARGV[8], ARGV[7]
local granted, head, now, mine
if mode == '2' then granted = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) end
if not granted then
  local v = mode ~= '2' and redis.call('GET', KEYS[1])
  mine = v == qid and not (KEYS[6] and redis.call('HGET', KEYS[6], 'o') == qid)
  if not mine and (mode ~= '0' or v) then
    now = node_ms()
    head = queue_take(KEYS[3], KEYS[4], KEYS[5], qid, ARGV[5], ARGV[6], now)
  end
  if mode ~= '2' and (mine or (not v and (mode == '0' or head == qid))) then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    now = now or node_ms()
    if redis.call('HGET', KEYS[4], qid) then redis.call('HSET', KEYS[4], qid, now + tonumber(ARGV[2])) end
    granted = true
  end
end
local f = fence_get(KEYS[2])
if not granted then
  return {0, 0, fence_str(f), redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]), head}
end
local acc = fence_raise(KEYS[2], f, ARGV[3], ARGV[4])
if KEYS[6] then holds_new(KEYS[6], ARGV[1], ARGV[9], acc and ARGV[3] or '0', tonumber(ARGV[2]), now or node_ms()) end
if ARGV[3] == '0' then return {1, 1, fence_str(f)} end
if acc then return {1, 1, ARGV[3]} end
return {1, 0, fence_str(f)}
