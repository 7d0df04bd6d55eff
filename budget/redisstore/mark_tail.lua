end
local reply = body({unpack(KEYS, 1, #KEYS - 1)}, {unpack(ARGV, 1, #ARGV - 4)})
if type(reply) == "number" then reply = {reply} end
if type(reply) == "table" and not reply.err then reply[#reply + 1] = MARK_NEW end
return reply
