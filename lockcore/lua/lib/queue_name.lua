-- Name the first live waiter of a lock key's queue (docs/fairness.md,
-- step 4) on its client's channel (the queue's "{" name "}:released:" and
-- the first 16 digits of its id; pcall: a user without PUBLISH rights
-- still releases; "id@key" when the lock key is not the queue's own: a
-- semaphore's permit, which waits in its semaphore's queue),
-- and reserve the lock for it: the lock key itself is set to its id, so
-- every SET NX is refused and only that waiter's attempt turns it into its
-- lock. what: the reservation's ms ('0': none), with 'f' first from a fair
-- client.
-- Notified waiting (not fair): the named waiter's place is cut to the
-- reservation's end, and the next live waiter is told to try then
-- ("id+ms"; refused by a reservation that has not quite ended, it tries
-- again at its end): if the named one has died, its reservation and its
-- place lapse together, and the next is granted at once instead of
-- sleeping until it refreshes its place. A fair release keeps the named
-- waiter's place: a waiter that is only slow (paused) keeps its turn, and
-- a dead one costs until its place lapses. skip (optional): a waiter not
-- to name (one handing back a reservation it cannot use).
--- @include "clock"
--- @include "queue"
local function queue_name(lock, q, dl, mark, what, skip)
  local now = node_ms()
  local h = queue_live_head(q, dl, now)
  if h and h == skip then h = queue_next_live(q, dl, now) end
  if not h then
    if redis.call('ZCARD', q) == 0 then redis.call('DEL', mark) end
    return
  end
  local fair = string.sub(what, 1, 1) == 'f'
  local ms = fair and string.sub(what, 2) or what
  if ms ~= '0' then redis.call('SET', lock, h, 'PX', ms) end
  local msg = h
  if q ~= '{' .. lock .. '}:waiters' then msg = h .. '@' .. lock end
  redis.pcall('PUBLISH', queue_chan(q, h), msg)
  if fair or ms == '0' then return end
  local until_ms = now + tonumber(ms)
  if (tonumber(redis.call('HGET', dl, h)) or 0) > until_ms then redis.call('HSET', dl, h, until_ms) end
  local n = queue_next_live(q, dl, now)
  if n then redis.pcall('PUBLISH', queue_chan(q, n), n .. '+' .. ms) end
end
