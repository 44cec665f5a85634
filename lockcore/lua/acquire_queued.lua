-- The acquire of a waiter on one lock key (docs/fairness.md; the block
-- "queued" decides). Every attempt sets the key to its own value ARGV[1]
-- (a plain lock: the attempt's lock id, so that a late rollback of an
-- earlier attempt can never delete it). A reentrant lock's key holds the
-- owner, which is the acquisition's id: there, a key of its own whose
-- holds are the owner's is a leftover of an earlier attempt, not a
-- reservation, and is left alone (a late attempt must not wipe a later
-- one's holds). The fence steps are the fenced acquire's (none with
-- ARGV[3] = '0').
-- KEYS[1] lock, KEYS[2] the bucket's hash, KEYS[3] the old fence key,
-- KEYS[4] waiters, KEYS[5] deadlines, KEYS[6] the mark, KEYS[7] (a
-- reentrant lock) its holds, which a grant starts with the hold ARGV[9];
-- ARGV[1] the key's value, ARGV[2] ttl, ARGV[3] proposal, ARGV[4] '-' or
-- the old fence key's idle expiry (block "fence"), ARGV[5] ticket, ARGV[6]
-- queue ttl ms, ARGV[7] mode, ARGV[8] the acquisition's id, ARGV[9] the
-- hold ('' for none), ARGV[10] how far ahead of the node's clock a
-- proposal may be, µs, ARGV[11] the bucket's field.
-- Returns {granted, accepted, fence, holder, holder pttl, head}.
--- @include "fence"
--- @include "queued"
local qid = ARGV[8]
local leftover = KEYS[7] and redis.call('HGET', KEYS[7], 'o') == qid
local granted, _, head = queued_try(1, {KEYS[1]}, {KEYS[4]}, {KEYS[5]}, {KEYS[6]}, ARGV[1], ARGV[2], ARGV[5],
  ARGV[6], ARGV[7], qid, leftover)
local f, o = fence_get(KEYS[2], ARGV[11], KEYS[3])
if not granted then
  return {0, 0, fence_str(f), redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]), head}
end
local acc = fence_raise(KEYS[2], ARGV[11], KEYS[3], f, o, ARGV[3], ARGV[4], ARGV[10], true)
if KEYS[7] then
  --- @include-local "holds"
  holds_new(KEYS[7], ARGV[1], ARGV[9], acc and ARGV[3] or '0', tonumber(ARGV[2]), node_ms())
end
if ARGV[3] == '0' then return {1, 1, fence_str(f)} end
if acc then return {1, 1, ARGV[3]} end
return {1, 0, fence_str(f)}
