-- lapse.lua: ends the run-time ceiling in force now, so what it lapses to
-- (setceiling.lua keeps it after it) is back: an unfreeze.
--
-- KEYS[1] the partition's ceilings hash
-- ARGV[1] bucket   ARGV[2] now µs, or "" for Redis TIME
--
-- Returns 1 if a change was in force and ended, 0 if none was.
local key, bucket = KEYS[1], ARGV[1]
local now = tonumber(ARGV[2])
if not now then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local cur = redis.call("HGET", key, bucket)
if not cur then return 0 end
local rest, ended = {}, false
for step in string.gmatch(cur, "[^;]+") do
  local _, untl = string.match(step, "^(%d+)@(%d+)$")
  local live = not untl or now < tonumber(untl)
  if not ended and live then
    ended = true -- the one in force: dropped
  elseif ended then
    rest[#rest + 1] = step
  end
end
if not ended then return 0 end
if #rest == 0 then
  redis.call("HDEL", key, bucket)
else
  redis.call("HSET", key, bucket, table.concat(rest, ";"))
end
return 1
