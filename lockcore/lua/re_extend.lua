-- Extend one hold: only a live hold of the owner holding the key. The hold
-- gets now + ttl; the key, the holds and the holder info are only pushed
-- out (another hold may need them longer); then the extension's fence step.
-- KEYS[1] lock, KEYS[2] fence, KEYS[3] holder info, KEYS[4] holds;
-- ARGV[1] the hold, ARGV[2] ttl ms, ARGV[3] fence expiry ms, ARGV[4] token.
--- @include "fence"
--- @include "clock"
--- @include "holds"
local now = node_ms()
if not holds_owner(KEYS[1], KEYS[4]) or not holds_live(KEYS[4], ARGV[1], now) then return 0 end
holds_put(KEYS[1], KEYS[4], ARGV[1], tonumber(ARGV[2]), now)
push_out(KEYS[3], ARGV[2])
fence_keep(KEYS[2], ARGV[4], ARGV[3])
return 1
