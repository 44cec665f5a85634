-- Extend one hold: only a live hold of the owner holding the key. The hold
-- gets now + ttl; the key, the holds and the holder info are only pushed
-- out (another hold may need them longer); then the extension's fence step.
-- KEYS[1] lock, KEYS[2] the bucket's hash, KEYS[3] the old fence key,
-- KEYS[4] holder info, KEYS[5] holds; ARGV[1] the hold, ARGV[2] ttl ms,
-- ARGV[3] '-' or the old fence key's expiry ms (block "fence"), ARGV[4]
-- token, ARGV[5] the bucket's field, ARGV[6] how far ahead of the node's
-- clock a token may go into the bucket (fence_keep).
--- @include "fence"
--- @include "clock"
--- @include "holds"
local now = node_ms()
if not holds_owner(KEYS[1], KEYS[5]) or not holds_live(KEYS[5], ARGV[1], now) then return 0 end
holds_put(KEYS[1], KEYS[5], ARGV[1], tonumber(ARGV[2]), now)
push_out(KEYS[4], ARGV[2])
fence_keep(KEYS[2], ARGV[5], KEYS[3], ARGV[4], ARGV[3], ARGV[6])
return 1
