-- After a grant, the token a majority agreed on goes to the holds of the
-- nodes that may not have it ("set if greater": it never goes down, and a
-- late copy finds another owner and does nothing).
-- KEYS[1] lock, KEYS[2] holds; ARGV[1] owner, ARGV[2] token.
--- @include "holds"
if holds_owner(KEYS[1], KEYS[2]) ~= ARGV[1] then return 0 end
holds_token(KEYS[2], ARGV[2])
return 1
