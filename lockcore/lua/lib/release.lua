-- The release of a lock key (docs/fairness.md, step 4), shared by the plain
-- lock and every kind that frees a lock key: lock, info (holder info),
-- q and dl (the waiters' queue), mark (anyone waits); id the releaser's
-- lock id, qid its place in the queue (the acquisition's id, which every
-- attempt's lock id starts with; docs/fairness.md); what: 'r' a rollback (of a failed attempt: it keeps its place,
-- tells nobody, reserves nothing), '' a release that tells nobody, or a
-- release that names the next live waiter and keeps the lock for it so
-- many ms ('0': none; 'f' before the ms: a fair client's release).
-- Returns 1 where the key held id, else 0.
-- Where nobody waits this is the classic compare-and-delete: the one DEL
-- of the lock, the holder info and the mark tells by its count whether the
-- mark was there. Else the releaser leaves the queue (also where it did not
-- hold: granted on a majority, its place on the other nodes would stay
-- first until it lapsed) and, where it held, names the first live waiter
-- on its client's channel ("{" lock "}:released:" and the first 16 digits
-- of its id; pcall: a user without PUBLISH rights still releases). The
-- named waiter's reservation is the lock key itself, set to its id: every
-- SET NX is refused, and only that waiter's attempt turns it into its lock.
-- The named waiter's place is cut to the reservation's end, and the next
-- live waiter is told to try then ("id+ms"; refused by a reservation
-- that has not quite ended, it tries again at its end): if the named one
-- has died,
-- its reservation and its place lapse together, and the next is granted
-- at once instead of sleeping until it refreshes its place.
--- @include "clock"
--- @include "queue"
local function release(lock, info, q, dl, mark, id, qid, what)
  local held = redis.call('GET', lock) == id
  if what == 'r' then
    if not held then return 0 end
    redis.call('DEL', lock, info)
    return 1
  end
  if not held then
    if redis.call('ZCARD', q) > 0 then queue_leave(q, dl, qid) end
    return 0
  end
  if redis.call('DEL', lock, info, mark) == 1 then return 1 end
  if redis.call('ZCARD', q) == 0 then return 1 end
  queue_leave(q, dl, qid)
  if redis.call('ZCARD', q) == 0 then return 1 end
  redis.call('SET', mark, '1', 'PX', math.max(redis.call('PTTL', q), 1))
  if what == '' then return 1 end
  local now = node_ms()
  local h = queue_live_head(q, dl, now)
  if not h then
    if redis.call('ZCARD', q) == 0 then redis.call('DEL', mark) end
    return 1
  end
  local chan = '{' .. lock .. '}:released:'
  local fair = string.sub(what, 1, 1) == 'f'
  local ms = fair and string.sub(what, 2) or what
  if ms ~= '0' then redis.call('SET', lock, h, 'PX', ms) end
  redis.pcall('PUBLISH', chan .. string.sub(h, 1, 16), h)
  if fair or ms == '0' then return 1 end
  local until_ms = now + tonumber(ms)
  if (tonumber(redis.call('HGET', dl, h)) or 0) > until_ms then redis.call('HSET', dl, h, until_ms) end
  local n = queue_next_live(q, dl, now)
  if n then redis.pcall('PUBLISH', chan .. string.sub(n, 1, 16), n .. '+' .. ms) end
  return 1
end
