-- Lessee expire: charge the slices of an instance that stopped renewing
-- them (it died) in full, once. A ceiling's slice becomes spend (what the
-- dead instance's requests used of it is not known, so all of it: over,
-- never under); a concurrency slice's slots are freed (its requests are
-- gone with it); a token bucket's slice was taken already and stays taken.
-- KEYS[1] lessee zset, KEYS[2] the instance's lessee hash
-- ARGV[1] instance id, ARGV[2] now µs or "" for Redis TIME
-- Returns the number of slices charged, or -1 if the instance renewed its
-- lease meanwhile.
if #KEYS ~= 2 or #ARGV ~= 2 then return redis.error_reply("tollgate: lessee expire: bad arguments") end
local now = tonumber(ARGV[2])
if not now then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local expiry = tonumber(redis.call("ZSCORE", KEYS[1], ARGV[1]))
if expiry and expiry > now then return -1 end
local slices = redis.call("HGETALL", KEYS[2])
for i = 1, #slices, 2 do
  local key = slices[i]
  local k, g = string.match(slices[i + 1], "^(%a)\t(%d+)\t")
  g = tonumber(g)
  if k == K_CEILING and g then
    redis.call("HINCRBY", key, "spent", string.format("%.0f", g))
    if redis.call("HINCRBY", key, "pending", string.format("%.0f", -g)) < 0 then redis.call("HSET", key, "pending", 0) end
  elseif k == K_CONCURRENCY and g then
    if redis.call("DECRBY", key, string.format("%.0f", g)) <= 0 then redis.call("DEL", key) end
  end
end
redis.call("DEL", KEYS[2])
redis.call("ZREM", KEYS[1], ARGV[1])
return #slices / 2
