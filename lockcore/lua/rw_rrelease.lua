-- A reader leaves (a release or a rollback): its own member only. A
-- release also leaves the queue where the reader still has a place (a
-- node that refused it while a majority admitted it), and the last live
-- reader's release (not a rollback, nor one that tells nobody) names the
-- first waiter, where anyone waits and no writer holds the key (a writer
-- waits for the readers to leave), unless a writer that is not in the
-- line has declared that it waits.
-- KEYS[1] readers, KEYS[2] lock, KEYS[3] waiters, KEYS[4] deadlines,
-- KEYS[5] mark, KEYS[6] the writer's intent; ARGV[1] id, ARGV[2] what to
-- do (as release.lua), ARGV[3] the reader's acquisition id. 1 if it was
-- registered.
--- @include "queue_name"
local n = redis.call('ZREM', KEYS[1], ARGV[1])
if ARGV[2] == 'r' then return n end
if redis.call('ZCARD', KEYS[3]) > 0 then queue_leave(KEYS[3], KEYS[4], ARGV[3]) end
if n == 0 or ARGV[2] == '' then return n end
if redis.call('EXISTS', KEYS[5]) == 0 or redis.call('EXISTS', KEYS[2]) == 1 then return n end
if redis.call('ZCOUNT', KEYS[1], '(' .. node_ms(), '+inf') > 0 then return n end
-- A writer that waits without a place in the line (it polls) takes the
-- free key itself: a reader named and kept the key here would go first,
-- and readers in line would starve it.
local w = redis.call('GET', KEYS[6])
if w and not redis.call('ZSCORE', KEYS[3], w) then return n end
queue_name(KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[2])
return n
