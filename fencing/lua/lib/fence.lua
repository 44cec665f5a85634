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
