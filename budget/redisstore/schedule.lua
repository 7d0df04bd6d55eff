-- schedule.lua: a ceiling change that takes effect at a later time (next
-- month's ceiling, set now): until then the amount in force stays — as a
-- change that lapses at that time — and from then on the new amount holds.
--
-- KEYS[1] the partition's ceilings hash
-- ARGV[1] bucket   ARGV[2] amount   ARGV[3] from µs
-- ARGV[4] the configured amount (in force when no change is)
-- ARGV[5] now µs, or "" for Redis TIME
--
-- A change that lapses is left alone: the schedule would have to sit
-- between it and what it lapses to. Returns 1 when scheduled, 0 when a
-- change that lapses is in force (nothing written).
local key, bucket = KEYS[1], ARGV[1]
local amount, from, configured = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if not amount or amount < 0 or not from or not configured then
  return redis.error_reply("tollgate: schedule: bad arguments")
end
local now = tonumber(ARGV[5])
if not now then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local current = configured
local cur = redis.call("HGET", key, bucket)
if cur then
  for step in string.gmatch(cur, "[^;]+") do
    local a, untl = string.match(step, "^(%d+)@(%d+)$")
    if not a then
      current = tonumber(step)
      break
    end
    if now < tonumber(untl) then return 0 end -- a change that lapses is in force
  end
end
redis.call("HSET", key, bucket, string.format("%.0f@%.0f;%.0f", current, from, amount))
return 1
