-- The release of a lock key (docs/fairness.md, step 4), shared by the plain
-- lock and every kind that frees a lock key: lock, info (holder info),
-- q and dl (the waiters' queue), mark (anyone waits); id the releaser's
-- lock id, qid its place in the queue (the acquisition's id, which every
-- attempt's lock id starts with; nil: the id with its 6 attempt digits
-- zeroed, which saves the plain release an argument); what: 'r' a
-- rollback (of a failed attempt: it keeps its place, tells nobody,
-- reserves nothing), '' a
-- release that tells nobody, or a release that names the first live
-- waiter and keeps the lock for it (block "queue_name"). Returns 1 where
-- the key held id, else 0.
-- Where nobody waits this is the classic compare-and-delete: the one DEL
-- of the lock, the holder info and the mark tells by its count whether the
-- mark was there, and the queue's functions are not even made (they are
-- included below that point). Else the releaser leaves the queue (also
-- where it did not hold: granted on a majority, its place on the other
-- nodes would stay first until it lapsed) and, where it held, names the
-- first live waiter; the mark is set again while anyone waits.
local function release(lock, info, q, dl, mark, id, qid, what)
  local held = redis.call('GET', lock) == id
  if what == 'r' then
    if not held then return 0 end
    redis.call('DEL', lock, info)
    return 1
  end
  if held and redis.call('DEL', lock, info, mark) == 1 then return 1 end
  if not qid then qid = string.sub(id, 1, #id - 6) .. '000000' end
  --- @include-local "queue_name"
  if not held then
    if redis.call('ZCARD', q) > 0 then queue_leave(q, dl, qid) end
    return 0
  end
  if redis.call('ZCARD', q) == 0 then return 1 end
  queue_leave(q, dl, qid)
  if redis.call('ZCARD', q) == 0 then return 1 end
  redis.call('SET', mark, '1', 'PX', math.max(redis.call('PTTL', q), 1))
  if what ~= '' then queue_name(lock, q, dl, mark, what) end
  return 1
end
