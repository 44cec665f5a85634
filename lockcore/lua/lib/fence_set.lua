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
-- ahead as fence_raise's.
local function fence_set_raise(k, lb, hb, ab, f, o, p, lg, ahead)
  if tonumber(p) <= f then return false end
  for i = 1, k do fence_raise(KEYS[hb + i], ARGV[ab + i], KEYS[lb + i], f, o[i], p, lg, ahead) end
  return true
end
