-- The fence key of a resource holds the largest token a node accepted for
-- it. Fence values are compared as Lua numbers (doubles): exact, because
-- tokens stay below 2^53. They go back to the client as decimal strings,
-- so that Redis never truncates them.

-- The node's fence value in fk, 0 if none.
local function fence_get(fk)
  return tonumber(redis.call('GET', fk) or '0') or 0
end

-- A fence value as the client reads it.
local function fence_str(f)
  return string.format('%.0f', f)
end

-- "Set if greater": store the proposal p (a decimal string) in fk if it is
-- greater than f, the fence value read before, with the idle expiry idle
-- (ms, '0' for none). True if stored. No token ever goes down here.
local function fence_raise(fk, f, p, idle)
  if tonumber(p) > f then
    if idle ~= '0' then redis.call('SET', fk, p, 'PX', idle) else redis.call('SET', fk, p) end
    return true
  end
  return false
end

-- May a first-round proposal p (the proposer's clock in µs, or the last
-- fence it saw + 1) count here? Not when it runs more than ahead µs ahead
-- of this node's own clock ('0' or nil: no bound): one client whose clock
-- runs fast would otherwise push the fences, and every later token, that
-- far ahead (and a resource's bound on how far ahead a token may be would
-- then refuse every honest writer). Refused here, the proposer gets its
-- token in a second round from the fences (fence_raise, unbounded). Only
-- acceptance gets rarer, so T1 and T2 hold as before (docs/fencing.md).
local function fence_within(p, ahead)
  if not ahead or ahead == '0' then return true end
  local t = redis.pcall('TIME')
  if t.err then return true end -- a user without TIME (an older ACL): no bound
  return tonumber(p) <= tonumber(t[1]) * 1000000 + tonumber(t[2]) + tonumber(ahead)
end

-- An extension's fence step: a lock kept alive for longer than the fence's
-- idle expiry must not outlive its fence key, so its own token goes back
-- where the fence is lower (a node that forgot it; "set if greater" of a
-- token a majority accepted: later proposals only get larger), else the
-- fence's expiry is pushed out to fexp ms, never in. token '0': unknown.
local function fence_keep(fk, token, fexp)
  if not fence_raise(fk, fence_get(fk), token, fexp) and fexp ~= '0' then
    local pt = redis.call('PTTL', fk)
    if pt >= 0 and pt < tonumber(fexp) then redis.call('PEXPIRE', fk, fexp) end
  end
end
