-- A waiter's attempt on k lock keys at once, each with its queue (one key
-- for the plain and reentrant locks, a set's members for the multi-resource
-- lock): docs/fairness.md. locks, qs, dls, marks: the keys, their queues,
-- deadlines and marks (tables of k); value what a grant sets the keys to;
-- qid the acquisition's id (its place, and the value of a reservation a
-- release made for it; with leftover set, a key holding qid is an earlier
-- attempt's leftover instead, which is refused); mode '2' (a notified
-- waiter's first attempt: SET NX on every key, and its place where
-- refused), '0' (a notified waiter: the keys first, the places refreshed
-- where refused) or '1' (fair: the places first, then the keys only as
-- the head of every queue, or where reserved for it). Refused, a notified
-- waiter hands back the keys reserved for it.
-- All or nothing on this node: every key is set, or none. A grant sets
-- the waiter's places to end with the lock's TTL (only ever cut, in a
-- line several keys share), so that a holder that dies is not first for
-- long. Returns granted, and when refused the first key that
-- refused (its index) and the head of its queue.
--- @include "clock"
--- @include "queue_take"
--- @include "queue_name"
local function queued_try(k, locks, qs, dls, marks, value, ttl, ticket, qttl, mode, qid, leftover)
  local now = node_ms()
  local free, mine, block = true, {}, nil
  for i = 1, k do
    local v = redis.call('GET', locks[i])
    mine[i] = mode ~= '2' and v == qid and not leftover
    if v and not mine[i] then
      free = false
      block = block or i
    end
  end
  local heads = {}
  if mode == '1' or not free then
    for i = 1, k do heads[i] = queue_take(qs[i], dls[i], marks[i], qid, ticket, qttl, now) end
  end
  if free and mode == '1' then
    for i = 1, k do
      if not mine[i] and heads[i] ~= qid then
        free = false
        block = block or i
      end
    end
  end
  if not free then
    -- A notified set refused on one member hands back the members released
    -- for it (it may wait long for the rest) to the next waiter, and stays
    -- in line; a fair one keeps them: its turn is its turn.
    if mode == '0' then
      for i = 1, k do
        if mine[i] then
          redis.call('DEL', locks[i])
          queue_name(locks[i], qs[i], dls[i], marks[i], '0', qid)
        end
      end
    end
    return false, block, heads[block]
  end
  -- A holder keeps its place in its key's own line until the lock's TTL
  -- (the waiters behind it wait for that key anyway); in a line several
  -- keys share (a semaphore's, for its permits) its place is only cut:
  -- dead between its grant and its leaving, it would keep the line from
  -- every other permit.
  for i = 1, k do
    redis.call('SET', locks[i], value, 'PX', ttl)
    local d = tonumber(redis.call('HGET', dls[i], qid) or '')
    if d and (qs[i] == '{' .. locks[i] .. '}:waiters' or d > now + tonumber(ttl)) then
      redis.call('HSET', dls[i], qid, now + tonumber(ttl))
    end
  end
  return true
end
