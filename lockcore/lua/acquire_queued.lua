-- The acquire of a waiter (docs/fairness.md). Its place in this node's
-- queue is a member scored by its ticket, with a deadline of its own;
-- taking or refreshing it drops dead waiters from the head and sets the
-- mark that anyone waits. A lock key that holds the waiter's own id is the
-- reservation a release made for it (or its own key from an earlier
-- attempt of this acquisition): the waiter takes it over, with a fresh TTL.
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
-- KEYS[5] the mark, KEYS[6] (a reentrant waiter) its holds, which a grant
-- starts with this hold (block "holds"); ARGV[1] id, ARGV[2] ttl,
-- ARGV[3] proposal, ARGV[4] fence idle, ARGV[5] ticket, ARGV[6] queue ttl
-- ms, ARGV[7] as above.
-- Returns {granted, accepted, fence, holder, holder pttl, head}.
--- @include "fence"
--- @include "clock"
--- @include "queue_take"
local id, mode = ARGV[1], ARGV[7]
local granted, head, now
if mode == '2' then granted = redis.call('SET', KEYS[1], id, 'NX', 'PX', ARGV[2]) end
if not granted then
  local v = mode ~= '2' and redis.call('GET', KEYS[1])
  if v ~= id and (mode ~= '0' or v) then
    now = node_ms()
    head = queue_take(KEYS[3], KEYS[4], KEYS[5], id, ARGV[5], ARGV[6], now)
  end
  if mode ~= '2' and (v == id or (not v and (mode == '0' or head == id))) then
    redis.call('SET', KEYS[1], id, 'PX', ARGV[2])
    if redis.call('HGET', KEYS[4], id) then
      redis.call('HSET', KEYS[4], id, (now or node_ms()) + tonumber(ARGV[2]))
    end
    granted = true
  end
end
local f = fence_get(KEYS[2])
if not granted then
  return {0, 0, fence_str(f), redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]), head}
end
local acc = fence_raise(KEYS[2], f, ARGV[3], ARGV[4])
if KEYS[6] then
  redis.call('DEL', KEYS[6])
  redis.call('HSET', KEYS[6], 'n', 1, 't', acc and ARGV[3] or '0')
  redis.call('PEXPIRE', KEYS[6], ARGV[2])
end
if ARGV[3] == '0' then return {1, 1, fence_str(f)} end
if acc then return {1, 1, ARGV[3]} end
return {1, 0, fence_str(f)}
