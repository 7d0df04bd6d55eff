-- Settle: resolve one reservation, at most once. Moves each ceiling's
-- reserved amount from pending to the actual spend, shifts each rate bucket
-- by the difference between actual and reserved cost (a refund, or debt),
-- frees concurrency slots, and leaves a tombstone so a replay changes nothing.
-- When it resolves the reservation now it also appends the ledger entry to
-- the org's ledger stream: the entry exists exactly when the spend does.
--
-- KEYS[1] reservation hash, KEYS[2] lease zset, KEYS[3] tombstone,
-- KEYS[4] ledger stream
-- ARGV[1] reservation id, ARGV[2] now µs or "" for Redis TIME,
-- ARGV[3] tombstone TTL ms, ARGV[4] mode (1 settle, 3 expire: the sweeper
-- charges the reserved amounts), ARGV[5] the ledger entry (JSON) or "",
-- ARGV[6] number of actual values m, then m values in debit order
-- (ceiling: actual units; rate: actual cost µs minus reserved cost µs;
-- concurrency: ignored). m = 0 charges the reserved amounts (the sweeper).
-- Then, optionally, m kinds and m bucket keys: what to charge when the
-- reservation record is gone but no tombstone says it was resolved (Redis
-- lost its data while the settlement waited in a spool). Ceilings are then
-- charged their actual spend; rate and concurrency state went with the data.
--
-- Stream entries: r the entry as the gateway wrote it, o the outcome (1
-- settled, 3 expired: the entry is the one recorded at reservation and the
-- reserved amount was charged, 4 settled without its record, 5 a late
-- settlement that corrected a sweep's charge).
--
-- The tombstone holds the outcome; a swept reservation's also holds its
-- debits ("3\n" then the reservation's d lines), so a late settlement can
-- correct the sweep's charge to the actual amounts, once (then "5").
--
-- Returns {outcome}: 1 settled now, 2 settled before, 3 expired (charged in
-- full by the sweeper), 4 settled without its record, 5 corrected a sweep,
-- 0 unknown id.

local m = tonumber(ARGV[6])
local ttl = tonumber(ARGV[3])
local mode = tonumber(ARGV[4])
local record = ARGV[5]
if not m or m < 0 or (#ARGV ~= 6 + m and #ARGV ~= 6 + 3 * m) or not ttl or ttl <= 0
  or (mode ~= 1 and mode ~= 3) then
  return redis.error_reply("tollgate: settle: bad arguments")
end
local actual = {}
for i = 1, m do
  actual[i] = tonumber(ARGV[6 + i])
  if not actual[i] then return redis.error_reply("tollgate: settle: bad actual " .. i) end
end
local function ledger(outcome, entry)
  if entry and entry ~= "" then
    redis.call("XADD", KEYS[4], "*", "r", entry, "o", outcome)
  end
end
local done = redis.call("GET", KEYS[3])
if done then
  local code, swept = string.match(done, "^(%d+)\n?(.*)$")
  code = tonumber(code)
  if code == 3 and mode == 1 and m > 0 and swept ~= "" then
    -- The sweeper charged this reservation in full (its debits kept in
    -- the tombstone); this late settlement corrects that charge to the
    -- actual amounts, once: the same steps as budget.CorrectSwept.
    local debits = {}
    for line in string.gmatch(swept, "[^\n]+") do
      local k, key, amount = string.match(line, "^(%a)\t(.+)\t(%d+)$")
      debits[#debits + 1] = {k, key, tonumber(amount)}
    end
    if #debits ~= m then return {3} end
    for i, debit in ipairs(debits) do
      local k, key, reserved = debit[1], debit[2], debit[3]
      if (k == "c" or k == "s" or k == "m") and actual[i] ~= reserved then
        if actual[i] < 0 then return redis.error_reply("tollgate: settle: negative actual " .. i) end
        local spent = tonumber(redis.call("HGET", key, "spent") or "0")
        redis.call("HSET", key, "spent", string.format("%.0f", math.max(0, spent + actual[i] - reserved)))
      elseif k == "g" and redis.call("HEXISTS", key .. ":amt", ARGV[1]) == 1 then
        redis.call("HSET", key .. ":amt", ARGV[1], string.format("%.0f", actual[i]))
      end
    end
    redis.call("SET", KEYS[3], 5, "KEEPTTL")
    ledger(5, record)
    return {5}
  end
  if code == 1 or code == 5 then return {2} end
  return {code}
end
local d = redis.call("HGET", KEYS[1], "d")
if not d then
  if #ARGV ~= 6 + 3 * m or m == 0 then return {0} end
  for i = 1, m do
    local k, key = ARGV[6 + m + i], ARGV[6 + 2 * m + i]
    if k == "c" or k == "m" then
      if actual[i] < 0 then return redis.error_reply("tollgate: settle: negative actual " .. i) end
      redis.call("HINCRBY", key, "spent", string.format("%.0f", actual[i]))
      -- A key this creates must not live forever: keep it past any period.
      if redis.call("PTTL", key) == -1 then redis.call("PEXPIRE", key, 41 * 86400000) end
    end
  end
  redis.call("ZREM", KEYS[2], ARGV[1])
  redis.call("SET", KEYS[3], 1, "PX", ttl)
  ledger(4, record)
  return {4}
end
local debits = {}
for line in string.gmatch(d, "[^\n]+") do
  local k, key, amount = string.match(line, "^(%a)\t(.+)\t(%d+)$")
  debits[#debits + 1] = {k, key, tonumber(amount)}
end
if m ~= 0 and m ~= #debits then
  return redis.error_reply("tollgate: settle: " .. m .. " actual values for " .. #debits .. " debits")
end
for i = 1, m do
  if (debits[i][1] == "c" or debits[i][1] == "m") and actual[i] < 0 then
    return redis.error_reply("tollgate: settle: negative actual " .. i)
  end
end
local now = tonumber(ARGV[2])
if not now then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

for i, debit in ipairs(debits) do
  local k, key, reserved = debit[1], debit[2], debit[3]
  if k == "r" then
    local delta = 0
    if m > 0 then delta = actual[i] end
    if delta ~= 0 then
      local tat = tonumber(redis.call("GET", key) or "0")
      tat = math.max(math.max(tat, now) + delta, now)
      if tat > now then
        redis.call("SET", key, string.format("%.0f", tat), "PX", math.floor((tat - now) / 1000) + 1000)
      else
        redis.call("DEL", key)
      end
    end
  elseif k == "g" then
    if m > 0 then
      if actual[i] > 0 then
        redis.call("HSET", key .. ":amt", ARGV[1], string.format("%.0f", actual[i]))
      else
        redis.call("ZREM", key, ARGV[1])
        redis.call("HDEL", key .. ":amt", ARGV[1])
      end
    end
  elseif k == "c" or k == "s" then
    local spent = reserved
    if m > 0 then spent = actual[i] end
    local pending = tonumber(redis.call("HGET", key, "pending") or "0")
    redis.call("HSET", key, "pending", string.format("%.0f", math.max(0, pending - reserved)))
    redis.call("HINCRBY", key, "spent", string.format("%.0f", spent))
  elseif k == "m" then
    -- A meter: nothing was reserved; the spend is counted now (the key
    -- got its lifetime at reservation; the fallback is for a key Redis
    -- lost in between).
    local spent = reserved
    if m > 0 then spent = actual[i] end
    if spent > 0 then
      redis.call("HINCRBY", key, "spent", string.format("%.0f", spent))
      if redis.call("PTTL", key) == -1 then redis.call("PEXPIRE", key, 41 * 86400000) end
    end
  else
    local flight = tonumber(redis.call("GET", key) or "0")
    if flight - reserved > 0 then
      redis.call("SET", key, string.format("%.0f", flight - reserved), "KEEPTTL")
    else
      redis.call("DEL", key)
    end
  end
end
if mode == 3 then
  ledger(3, redis.call("HGET", KEYS[1], "e"))
else
  ledger(1, record)
end
redis.call("DEL", KEYS[1])
redis.call("ZREM", KEYS[2], ARGV[1])
if mode == 3 then
  -- Keep what was charged, so a settlement that comes late can correct it.
  redis.call("SET", KEYS[3], "3\n" .. d, "PX", ttl)
else
  redis.call("SET", KEYS[3], mode, "PX", ttl)
end
return {1}
