-- Raise: raise a ceiling period's settled spend to ARGV[1] if it is lower
-- (never lower it: concurrent settlements are never undone), keeping a key
-- this makes ARGV[2] ms, and return what it was.
-- KEYS[1] the period's counter (hash: spent, pending)
-- ARGV[1] spend (units, ≥ 0), ARGV[2] lifetime ms (> 0)
local spent, keep = tonumber(ARGV[1]), tonumber(ARGV[2])
if #KEYS ~= 1 or #ARGV ~= 2 or not spent or spent < 0 or spent ~= math.floor(spent) or not keep or keep <= 0 then
  return redis.error_reply("tollgate: raise: bad arguments")
end
local was = tonumber(redis.call("HGET", KEYS[1], "spent") or "0")
if spent > was then
  redis.call("HSET", KEYS[1], "spent", string.format("%.0f", spent))
  if redis.call("PTTL", KEYS[1]) < 0 then redis.call("PEXPIRE", KEYS[1], string.format("%.0f", keep)) end
end
return was
