-- Count: add to a counter that lives for a window from its first count.
-- KEYS[1] the counter (a hash: n, until in unix µs).
-- ARGV[1] now µs or "" for Redis TIME, ARGV[2] n (≥ 0; 0 only reads),
-- ARGV[3] window µs (> 0).
-- Returns {total, µs until it lapses} ({0, 0} for none).
local n, window = tonumber(ARGV[2]), tonumber(ARGV[3])
if #KEYS ~= 1 or #ARGV ~= 3 or not n or n < 0 or n ~= math.floor(n) or not window or window <= 0 then
  return redis.error_reply("tollgate: count: bad arguments")
end
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local v = redis.call("HMGET", KEYS[1], "n", "until")
local total, untl = tonumber(v[1] or "0"), tonumber(v[2] or "0")
if untl <= now then
  if n == 0 then return {0, 0} end
  total, untl = 0, now + window
end
if n > 0 then
  total = total + n
  redis.call("HSET", KEYS[1], "n", string.format("%.0f", total), "until", string.format("%.0f", untl))
  redis.call("PEXPIRE", KEYS[1], string.format("%.0f", math.ceil((untl - now) / 1000) + 1000))
end
return {total, untl - now}
