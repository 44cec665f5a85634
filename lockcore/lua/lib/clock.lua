-- The node's own clock in ms (scripts may call TIME on Redis 7): deadlines
-- kept on a node are compared on that node's clock only.
local function node_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
