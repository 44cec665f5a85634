-- A waiter that gives up (its retries or wait_ms ran out, or its caller
-- canceled it) leaves the line of one lock key. A reservation a release
-- made for it (the key set to its id) goes to the next waiter as that
-- release would have given it: a waiter named just before it gave up
-- would otherwise keep the key from everyone until the reservation
-- lapsed. Where the key holds its id as a grant instead (a reentrant
-- lock's owner, whose holds name it: holds, optional), it is left to the
-- rollback. First in line and naming nobody, it wakes the next waiter,
-- who would otherwise sleep until its refresh. what: as a release's.
--- @include "queue_name"
local function queue_give_up(lock, q, dl, mark, id, what, holds)
  local now = node_ms()
  local first = queue_live_head(q, dl, now) == id
  queue_leave(q, dl, id)
  if what == '' then return end
  if redis.call('GET', lock) == id and not (holds and redis.call('HGET', holds, 'o') == id) then
    redis.call('DEL', lock)
    queue_name(lock, q, dl, mark, what)
    return
  end
  if first then queue_wake(q, dl, now) end
  if redis.call('ZCARD', q) == 0 then redis.call('DEL', mark) end
end
