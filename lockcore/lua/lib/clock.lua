-- The node's own clock in ms (scripts may call TIME on Redis 7): deadlines
-- kept on a node are compared on that node's clock only.
local function node_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The node's clock in µs, as a decimal string (exact: below 2^53); '0'
-- for a user without TIME.
local function node_us_str()
  local t = redis.pcall('TIME')
  if t.err then return '0' end
  return string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
end
