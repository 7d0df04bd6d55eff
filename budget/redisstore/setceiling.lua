-- setceiling.lua: sets a run-time ceiling, atomically with what it lapses to.
--
-- KEYS[1] the partition's ceilings hash
-- ARGV[1] bucket   ARGV[2] amount (negative: back to the configured one)
-- ARGV[3] until µs (0: permanent)   ARGV[4] now µs, or "" for Redis TIME
--
-- A permanent change, or a reset, replaces whatever was set. A temporary one
-- keeps what is in force now, and what that lapses to, after it:
-- "amount@until;…" (override.lua reads the first still in force), so that a
-- one-week top-up over a permanent $300 lapses to $300, and a top-up of a
-- frozen team to the freeze, not to the configured amount.
local key, bucket = KEYS[1], ARGV[1]
local amount, untl = tonumber(ARGV[2]), tonumber(ARGV[3])
if amount < 0 then return redis.call("HDEL", key, bucket) end
if untl == 0 then return redis.call("HSET", key, bucket, ARGV[2]) end
local now = tonumber(ARGV[4])
if not now then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local v = ARGV[2] .. "@" .. ARGV[3]
local cur = redis.call("HGET", key, bucket)
if cur then
  local last = now -- a step comes back if it lasts past the one before it
  for step in string.gmatch(cur, "[^;]+") do
    local a, u = string.match(step, "^(%d+)@(%d+)$")
    if not a then
      v = v .. ";" .. step
      break
    end
    if tonumber(u) > last then
      v = v .. ";" .. step
      last = tonumber(u)
    end
  end
end
return redis.call("HSET", key, bucket, v)
