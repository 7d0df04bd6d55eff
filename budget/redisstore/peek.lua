-- Peek: read buckets without changing them.
-- KEYS[1]: the partition's meta hash (run-time ceilings); KEYS[1+i]: one
-- bucket per limit.
-- ARGV[1] now µs or "" for Redis TIME, then a kind (K_RATE, K_CEILING,
-- K_METER, K_LOG, K_CONCURRENCY: kinds.lua) and a bucket name (for K_LOG the window
-- µs) per limit. Returns {now, then 5 values per limit: tat, spent,
-- pending, in-flight, run-time ceiling (-1: none)}.
local n = #KEYS - 1
if #ARGV ~= 1 + 2 * n then return redis.error_reply("tollgate: peek: bad arguments") end
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local fields, fieldOf = {}, {}
for i = 1, n do
  if ARGV[1 + i] == K_CEILING and ARGV[1 + n + i] ~= "" then
    fields[#fields + 1] = ARGV[1 + n + i]
    fieldOf[i] = #fields
  end
end
local meta = {}
if #fields > 0 then meta = redis.call("HMGET", KEYS[1], unpack(fields)) end
local out = {now}
for i = 1, n do
  local key, k = KEYS[1 + i], ARGV[1 + i]
  local tat, spent, pending, flight, ovr = 0, 0, 0, 0, -1
  if k == K_RATE then
    tat = tonumber(redis.call("GET", key) or "0")
  elseif k == K_CEILING then
    local v = redis.call("HMGET", key, "spent", "pending")
    spent, pending = tonumber(v[1] or "0"), tonumber(v[2] or "0")
    local o = fieldOf[i] and override(meta[fieldOf[i]], now)
    if o then ovr = o end
  elseif k == K_METER then
    spent = tonumber(redis.call("HGET", key, "spent") or "0")
  elseif k == K_LOG then
    local w = tonumber(ARGV[1 + n + i])
    local live = redis.call("ZRANGEBYSCORE", key, string.format("(%.0f", now - w), "+inf")
    for _, id in ipairs(live) do
      spent = spent + tonumber(redis.call("HGET", key .. ":amt", id) or "0")
    end
  elseif k == K_CONCURRENCY then
    flight = tonumber(redis.call("GET", key) or "0")
  else
    return redis.error_reply("tollgate: peek: bad kind " .. i)
  end
  out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4], out[#out + 5] = tat, spent, pending, flight, ovr
end
return out
