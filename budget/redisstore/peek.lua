-- Peek: read buckets without changing them.
-- KEYS: one bucket per limit; ARGV[1] now µs or "" for Redis TIME, then one
-- kind per key ("r", "c", "n"). Returns {now, then 4 counters per key:
-- tat, spent, pending, in-flight}.
if #ARGV ~= 1 + #KEYS then return redis.error_reply("tollgate: peek: bad arguments") end
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local out = {now}
for i, key in ipairs(KEYS) do
  local k = ARGV[1 + i]
  local tat, spent, pending, flight = 0, 0, 0, 0
  if k == "r" then
    tat = tonumber(redis.call("GET", key) or "0")
  elseif k == "c" then
    local v = redis.call("HMGET", key, "spent", "pending")
    spent, pending = tonumber(v[1] or "0"), tonumber(v[2] or "0")
  elseif k == "n" then
    flight = tonumber(redis.call("GET", key) or "0")
  else
    return redis.error_reply("tollgate: peek: bad kind " .. i)
  end
  out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4] = tat, spent, pending, flight
end
return out
