-- Reset: zero a ceiling period's settled spend, if the period has a
-- counter, and return what it was; pending is left alone (the settlements
-- of reservations in flight still count).
-- KEYS[1] the period's counter (hash: spent, pending). No arguments.
if #KEYS ~= 1 or #ARGV ~= 0 then return redis.error_reply("tollgate: reset: bad arguments") end
local was = redis.call("HGET", KEYS[1], "spent")
if was then redis.call("HSET", KEYS[1], "spent", 0) end
return tonumber(was or "0")
