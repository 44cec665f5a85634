-- The fence of a set of k resources (the multi-resource lock), over the
-- block "fence": member i's old fence key is KEYS[lb + i], its bucket's
-- hash KEYS[hb + i] and its bucket's field ARGV[ab + i].

-- The largest fence of the set, and each member's old key's value.
local function fence_set_get(k, lb, hb, ab)
  local f, o = 0, {}
  for i = 1, k do
    local fi, oi = fence_get(KEYS[hb + i], ARGV[ab + i], KEYS[lb + i])
    o[i] = oi
    if fi > f then f = fi end
  end
  return f, o
end

-- "Set if greater" of p over the set: stored in every member's fence if
-- greater than f, the largest of them (fence_set_get); true if stored.
-- ahead and first as fence_raise's: a first-round p far ahead of this
-- node's clock is stored in none of them.
local function fence_set_raise(k, lb, hb, ab, f, o, p, lg, ahead, first)
  local n = tonumber(p)
  if n <= f then return false end
  if first then
    if fence_far(n, ahead) then return false end
    ahead = nil -- checked once for the whole set
  end
  for i = 1, k do fence_raise(KEYS[hb + i], ARGV[ab + i], KEYS[lb + i], f, o[i], p, lg, ahead) end
  return true
end
