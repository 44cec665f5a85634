-- A resource's fence on this node (docs/fencing.md, "Where fences live"):
-- the field fb of the hash fh, its bucket, which it shares with the other
-- resources of the bucket; and fk, the resource's own fence key of the
-- layout before buckets ("{key}:fence"), which clients of that layout read
-- and write. The fence value is the larger of the two (0 if neither is
-- set), and it only grows: every write below stores a value only if it is
-- larger, and the old key goes only where the bucket was just raised above
-- it. Fence values are compared as Lua numbers (doubles): exact, because
-- tokens stay below 2^53. They go back to the client as decimal strings,
-- so that Redis never truncates them.

-- The fence value, and the old key's alone (0 if none). A key or field
-- that is not there is 0 without a tonumber: the old key hardly ever is.
local function fence_get(fh, fb, fk)
  local v = redis.call('HGET', fh, fb)
  local f = v and tonumber(v) or 0
  v = redis.call('GET', fk)
  local o = v and tonumber(v) or 0
  if o > f then return o, o end
  return f, o
end

-- A fence value as the client reads it.
local function fence_str(f)
  return string.format('%.0f', f)
end

-- Is n (a number) more than ahead µs past this node's own clock?
-- ('0' or nil: no bound; a user without TIME, from an older ACL: no.)
-- now: the node's clock in ms (node_ms) where the script has read it
-- already, else nil; whole ms make the bound stricter by less than 1 ms,
-- never looser. The clock's µs within its second are turned into a
-- number only where its whole seconds do not settle it (each tonumber
-- costs the node about as much as a small command; every sum here stays
-- below 2^53: exact).
local function fence_far(n, ahead, now)
  if not ahead or ahead == '0' then return false end
  if now then return n > now * 1000 + tonumber(ahead) end
  local t = redis.pcall('TIME')
  if t.err then return false end
  local lo = tonumber(t[1]) * 1000000 + tonumber(ahead)
  return n > lo and n > lo + tonumber(t[2])
end

-- "Set if greater": store the proposal p (a decimal string) if it is
-- greater than f, the fence value fence_get gave (o: the old key's), in
-- the bucket. lg '-': the old key goes where it was (the bucket now holds
-- more); else, in transition mode, the old key is written too, for the
-- clients of the old layout, expiring after lg ms ('0': never).
-- A p far ahead of this node's clock (fence_far, ahead '0' or nil: no
-- bound) is, with first set (a first-round proposal: the proposer's clock
-- in µs, or the last fence it saw + 1), not stored at all: one client
-- whose clock runs fast would otherwise push the fences, and every later
-- token, that far ahead (and a resource's bound on how far ahead a token
-- may be would then refuse every honest writer); refused here, the
-- proposer gets its token in a second round from the fences. Only
-- acceptance gets rarer, so T1 and T2 hold as before (docs/fencing.md).
-- Without first (a second round's proposal), a far p stays this
-- resource's own: in its own key, without expiry, never in the bucket,
-- which would pass it on to every resource of the bucket. The clock is
-- read only for a p that would be stored (now: as fence_far's). True if
-- stored. No fence value ever goes down here.
local function fence_raise(fh, fb, fk, f, o, p, lg, ahead, first, now)
  local n = tonumber(p)
  if n <= f then return false end
  if fence_far(n, ahead, now) then
    if first then return false end
    redis.call('SET', fk, p)
    return true
  end
  redis.call('HSET', fh, fb, p)
  if lg ~= '-' then
    if lg ~= '0' then redis.call('SET', fk, p, 'PX', lg) else redis.call('SET', fk, p) end
  elseif o > 0 then
    redis.call('DEL', fk)
  end
  return true
end

-- An extension's fence step, for the lock's token ('0': unknown, or plain
-- Redlock: nothing to do). Where the bucket is below the token (a node
-- that forgot it, or never accepted it), the token goes back: a "set if
-- greater" of a token a majority accepted, so later proposals only get
-- larger. A token far ahead of this node's clock (fence_far) goes to the
-- resource's own key, without expiry, never to the bucket, as in
-- fence_raise. The bucket never expires. In transition mode (lg not '-') the
-- old key, which does, is kept as before: the token goes back where it is
-- lower, else its expiry is pushed out to lg ms, never in, so that a lock
-- kept alive for longer than the old key's idle expiry never outlives it.
local function fence_keep(fh, fb, fk, token, lg, ahead)
  if token == '0' then return end
  local t = tonumber(token)
  if t > (tonumber(redis.call('HGET', fh, fb) or '0') or 0) then
    if fence_far(t, ahead) then
      if t > (tonumber(redis.call('GET', fk) or '0') or 0) then redis.call('SET', fk, token)
      else redis.call('PERSIST', fk) end
      return
    end
    redis.call('HSET', fh, fb, token)
  end
  if lg == '-' then return end
  if t > (tonumber(redis.call('GET', fk) or '0') or 0) then
    if lg ~= '0' then redis.call('SET', fk, token, 'PX', lg) else redis.call('SET', fk, token) end
  elseif lg ~= '0' then
    local pt = redis.call('PTTL', fk)
    if pt >= 0 and pt < tonumber(lg) then redis.call('PEXPIRE', fk, lg) end
  end
end
