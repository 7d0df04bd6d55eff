-- Extend: renew the lease of an open reservation.
-- KEYS[1] reservation hash, KEYS[2] lease zset
-- ARGV[1] reservation id, ARGV[2] lease µs, ARGV[3] now µs or "" for Redis TIME
-- Returns 1, or 0 when the reservation is not open.
local lease = tonumber(ARGV[2])
if not lease or lease <= 0 then return redis.error_reply("tollgate: extend: bad lease") end
local now = tonumber(ARGV[3])
if not now then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
if redis.call("EXISTS", KEYS[1]) == 0 then return 0 end
local expiry = string.format("%.0f", now + lease)
redis.call("HSET", KEYS[1], "exp", expiry)
redis.call("PEXPIRE", KEYS[1], string.format("%.0f", math.floor(lease / 1000) + 86400000))
redis.call("ZADD", KEYS[2], expiry, ARGV[1])
return 1
