-- The waiters' queue of a resource (docs/fairness.md): q, a sorted set of
-- lock ids scored by ticket; dl, a hash of each one's deadline on this
-- node's clock (ms); mark, set while anyone waits. Each waiter's place is
-- its own member: nothing is counted.

-- The first live waiter, dropping dead ones from the head (at most 64 in a
-- call); nil if none was found.
local function queue_live_head(q, dl, now)
  for _ = 1, 64 do
    local h = redis.call('ZRANGE', q, 0, 0)[1]
    if not h then return nil end
    if (tonumber(redis.call('HGET', dl, h) or '0') or 0) >= now then return h end
    redis.call('ZREM', q, h)
    redis.call('HDEL', dl, h)
  end
  return nil
end

-- The first live waiter behind the head (at most 8 looked at), or nil.
local function queue_next_live(q, dl, now)
  for _, w in ipairs(redis.call('ZRANGE', q, 1, 8)) do
    if (tonumber(redis.call('HGET', dl, w) or '0') or 0) >= now then return w end
  end
  return nil
end

-- Leave the queue (id's place only).
local function queue_leave(q, dl, id)
  redis.call('ZREM', q, id)
  return redis.call('HDEL', dl, id)
end

-- A waiter's channel: the queue's "{" key "}:released:" and the first 16
-- digits of its id (its client's).
local function queue_chan(q, id)
  return string.sub(q, 1, #q - 7) .. 'released:' .. string.sub(id, 1, 16)
end

-- Wake the first live waiter: it tries at once (nothing is kept for it).
local function queue_wake(q, dl, now)
  local h = queue_live_head(q, dl, now)
  if h then redis.pcall('PUBLISH', queue_chan(q, h), h) end
end
