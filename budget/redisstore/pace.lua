-- Pace: hand one request its slot on an upstream's shared drain (a leaky
-- bucket as a meter: a constant rate, no burst), across every instance.
-- KEYS[1] the upstream's pacing key
-- ARGV[1] this request's share of the drain in µs, ARGV[2] the longest wait
-- µs the caller accepts, ARGV[3] now µs or "" for Redis TIME.
-- Returns {wait µs} with the slot taken, or {-1, wait µs} when the slot is
-- further away than the caller accepts (nothing taken).
local interval, maxwait = tonumber(ARGV[1]), tonumber(ARGV[2])
if not interval or interval < 0 or not maxwait or maxwait < 0 then
  return redis.error_reply("tollgate: pace: bad arguments")
end
local now = tonumber(ARGV[3])
if not now then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local tat = tonumber(redis.call("GET", KEYS[1]) or "0")
local slot = math.max(tat, now)
if slot - now > maxwait then
  return {-1, slot - now}
end
local next = slot + interval
redis.call("SET", KEYS[1], string.format("%.0f", next), "PX", math.floor((next - now) / 1000) + 1000)
return {slot - now}
