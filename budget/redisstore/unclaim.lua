-- Unclaim: give claims back. KEYS: the claims (one partition's). No
-- arguments. Returns how many were held.
if #KEYS == 0 or #ARGV ~= 0 then return redis.error_reply("tollgate: unclaim: bad arguments") end
return redis.call("DEL", unpack(KEYS))
