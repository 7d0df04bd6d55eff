-- Claim: take a one-shot claim until now + ttl, if nobody holds it.
-- KEYS[1] the claim (a string: when it lapses, unix µs).
-- ARGV[1] now µs or "" for Redis TIME, ARGV[2] ttl µs (> 0).
-- Returns 1 if this call took it, 0 if it is held.
local ttl = tonumber(ARGV[2])
if #KEYS ~= 1 or #ARGV ~= 2 or not ttl or ttl <= 0 then
  return redis.error_reply("tollgate: claim: bad arguments")
end
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
if tonumber(redis.call("GET", KEYS[1]) or "0") > now then return 0 end
-- The key goes by itself a second after it lapses (by Redis's own clock).
redis.call("SET", KEYS[1], string.format("%.0f", now + ttl), "PX", string.format("%.0f", math.ceil(ttl / 1000) + 1000))
return 1
