-- Taking a place in the waiters' queue (block "queue").
--- @include "queue"
--- @include "ttl"

-- Take or refresh id's place (deadline now + qttl), set the mark, and
-- return the first live waiter.
local function queue_take(q, dl, mark, id, ticket, qttl, now)
  qttl = tonumber(qttl)
  redis.call('ZADD', q, ticket, id)
  redis.call('HSET', dl, id, now + qttl)
  push_out(q, 2 * qttl)
  push_out(dl, 2 * qttl)
  if redis.call('PTTL', mark) < 2 * qttl then redis.call('SET', mark, '1', 'PX', 2 * qttl) end
  return queue_live_head(q, dl, now)
end
