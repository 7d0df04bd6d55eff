-- Expired: the ids of reservations whose lease has run out, at most ARGV[2].
-- KEYS[1] lease zset; ARGV[1] now µs or "" for Redis TIME.
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
return redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", string.format("%.0f", now), "LIMIT", 0, tonumber(ARGV[2]))
