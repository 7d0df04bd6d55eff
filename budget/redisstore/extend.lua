-- Extend: renew the lease of an open reservation.
-- KEYS[1] open reservations (hash), KEYS[2] lease zset, KEYS[3] the record
-- as versions before 0.8 kept it
-- ARGV[1] reservation id, ARGV[2] lease µs, ARGV[3] now µs or "" for Redis TIME
-- Returns 1, or 0 when the reservation is not open.
local lease = tonumber(ARGV[2])
if not lease or lease <= 0 then return redis.error_reply("tollgate: extend: bad lease") end
local now = tonumber(ARGV[3])
if not now then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
if redis.call("HEXISTS", KEYS[1], ARGV[1]) == 0 and redis.call("EXISTS", KEYS[3]) == 0 then return 0 end
redis.call("ZADD", KEYS[2], string.format("%.0f", now + lease), ARGV[1])
return 1
