-- Reserve: check every debit of one reservation and, only if all fit, apply
-- them all and record the reservation as a lease. All keys share one hash
-- tag (the partition), so the script runs on one node of a cluster.
--
-- KEYS[1]  reservation hash       KEYS[2]  lease zset (score: expiry µs)
-- KEYS[3]  tombstone of the id    KEYS[4]  run-time ceilings (hash: bucket → amount)
-- KEYS[4+i] the bucket of debit i
-- ARGV[1]  reservation id         ARGV[2]  lease µs
-- ARGV[3]  now µs, or "" for Redis TIME (tests pin the clock)
-- ARGV[4]  number of debits n
-- then 6 values per debit:
--   kind ("r" token bucket, "c" ceiling or fixed window, "s" sliding
--   window, "g" sliding log, "n" concurrency, "m" meter: a ceiling key
--   that is only recorded here and charged at settlement),
--   amount (rate: cost in µs of the bucket; ceiling: units; concurrency: 1),
--   capacity (rate: tolerance µs; ceiling: the ceiling; concurrency: slots),
--   period start µs and end µs (ceiling; for "g" the window µs and 0;
--   0 0 otherwise),
--   bucket name (the field of a run-time ceiling in KEYS[4]; for "s" the
--   previous window's key, in the same slot),
--   shadow ("1": evaluated, never refuses, not taken when it would refuse),
--   keep ms: how long the bucket key outlives now (ceiling: after its
--   period ends; concurrency: from now). Relative, so a test's pinned clock
--   and Redis's own agree on it.
-- ARGV[5 + 8n], optional: the ledger entry the sweeper appends to the
--   ledger stream if the lease expires unsettled.
--
-- Returns {status, now, then 5 values per debit as read before any write:
-- tat, spent, pending, in-flight, run-time ceiling (-1: none)}. status: 1 allowed, 0 refused,
-- -1 duplicate id, -2 a ceiling's period does not contain now (the caller
-- recomputes periods from the returned now and calls again).

local n = tonumber(ARGV[4])
if not n or n < 0 or #KEYS ~= 4 + n or (#ARGV ~= 4 + 8 * n and #ARGV ~= 5 + 8 * n) then
  return redis.error_reply("tollgate: reserve: bad argument count")
end
local lease = tonumber(ARGV[2])
if not lease or lease <= 0 then
  return redis.error_reply("tollgate: reserve: bad lease")
end
local now = tonumber(ARGV[3])
if not now then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Validate every argument before the first write.
local kinds, amounts, caps, starts, ends, names, shadows, expires = {}, {}, {}, {}, {}, {}, {}, {}
for i = 1, n do
  local b = 4 + 8 * (i - 1)
  kinds[i] = ARGV[b + 1]
  amounts[i], caps[i] = tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])
  starts[i], ends[i], names[i] = tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5]), ARGV[b + 6]
  shadows[i], expires[i] = ARGV[b + 7] == "1", tonumber(ARGV[b + 8])
  local k = kinds[i]
  if (k ~= "r" and k ~= "c" and k ~= "s" and k ~= "g" and k ~= "n" and k ~= "m") or not amounts[i] or amounts[i] < 0 or not caps[i] or caps[i] < 0
      or not starts[i] or not ends[i] or not expires[i] then
    return redis.error_reply("tollgate: reserve: bad debit " .. i)
  end
  if (k == "c" or k == "s" or k == "m") and (now < starts[i] or now >= ends[i]) then
    return {-2, now}
  end
end
if redis.call("EXISTS", KEYS[1]) == 1 or redis.call("EXISTS", KEYS[3]) == 1 then
  return {-1, now}
end

local out = {1, now}
local allowed = true
local skip = {} -- shadow debits that would refuse: not taken
local tats, spents, pendings, flights = {}, {}, {}, {}
for i = 1, n do
  local key, k = KEYS[4 + i], kinds[i]
  local tat, spent, pending, flight, ovr = 0, 0, 0, 0, -1
  if k == "r" then
    tat = tonumber(redis.call("GET", key) or "0")
    local from = math.max(tat, now)
    if amounts[i] > caps[i] or from + amounts[i] - now > caps[i] then skip[i] = true end
  elseif k == "c" then
    local v = redis.call("HMGET", key, "spent", "pending")
    spent, pending = tonumber(v[1] or "0"), tonumber(v[2] or "0")
    local o = override(redis.call("HGET", KEYS[4], names[i]), now)
    if o then ovr = o; caps[i] = o end
    if amounts[i] > caps[i] - spent - pending then skip[i] = true end
  elseif k == "s" then
    local v = redis.call("HMGET", key, "spent", "pending")
    spent, pending = tonumber(v[1] or "0"), tonumber(v[2] or "0")
    local p = redis.call("HMGET", names[i], "spent", "pending")
    local prev = tonumber(p[1] or "0") + tonumber(p[2] or "0")
    local w = ends[i] - starts[i]
    -- the same float64 expression as budget.SlidingWeight
    local weighted = math.floor(prev * (w - (now - starts[i])) / w)
    if amounts[i] > caps[i] or amounts[i] > caps[i] - spent - pending - weighted then skip[i] = true end
    tat = prev -- reported in the first counter slot
  elseif k == "g" then
    -- A sliding log: a sorted set of reservation ids by time, their
    -- amounts in a hash beside it. Entries that left the window go first.
    local w, amt = starts[i], key .. ":amt"
    local old = redis.call("ZRANGEBYSCORE", key, "-inf", string.format("%.0f", now - w))
    if #old > 0 then
      redis.call("HDEL", amt, unpack(old))
      redis.call("ZREMRANGEBYSCORE", key, "-inf", string.format("%.0f", now - w))
    end
    local live = redis.call("ZRANGE", key, 0, -1, "WITHSCORES")
    local ats, vals = {}, {}
    for j = 1, #live, 2 do
      ats[#ats + 1] = tonumber(live[j + 1])
      vals[#vals + 1] = tonumber(redis.call("HGET", amt, live[j]) or "0")
      spent = spent + vals[#vals]
    end
    -- when enough has aged out (the same walk as budget.LogFreeAt)
    local freed = 0
    for j = 1, #ats do
      if spent - freed + amounts[i] <= caps[i] then break end
      freed = freed + vals[j]
      if spent - freed + amounts[i] <= caps[i] then tat = ats[j] + w; break end
    end
    if amounts[i] > caps[i] or spent + amounts[i] > caps[i] then skip[i] = true end
  elseif k == "n" then
    flight = tonumber(redis.call("GET", key) or "0")
    if flight + amounts[i] > caps[i] then skip[i] = true end
  end -- "m": nothing to read or check
  if skip[i] and not shadows[i] then allowed = false end
  tats[i], spents[i], pendings[i], flights[i] = tat, spent, pending, flight
  out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4], out[#out + 5] = tat, spent, pending, flight, ovr
end
if not allowed then
  out[1] = 0
  return out
end

local record = {}
for i = 1, n do
  local key, k = KEYS[4 + i], kinds[i]
  if skip[i] then
    -- a shadow limit that would have refused: counted by the caller, not taken
  elseif k == "r" then
    local tat = math.max(tats[i], now) + amounts[i]
    -- The key lives until the bucket is full again, then reads as missing.
    redis.call("SET", key, string.format("%.0f", tat), "PX", math.floor((tat - now) / 1000) + 1000)
  elseif k == "g" then
    redis.call("ZADD", key, string.format("%.0f", now), ARGV[1])
    redis.call("HSET", key .. ":amt", ARGV[1], string.format("%.0f", amounts[i]))
    redis.call("PEXPIRE", key, string.format("%.0f", expires[i]))
    redis.call("PEXPIRE", key .. ":amt", string.format("%.0f", expires[i]))
  elseif k == "c" or k == "s" then
    redis.call("HINCRBY", key, "pending", string.format("%.0f", amounts[i]))
    redis.call("PEXPIRE", key, string.format("%.0f", math.floor((ends[i] - now) / 1000) + expires[i]))
  elseif k == "n" then
    redis.call("INCRBY", key, string.format("%.0f", amounts[i]))
    redis.call("PEXPIRE", key, string.format("%.0f", expires[i]))
  elseif k == "m" then
    -- Charged at settlement; here the counter only gets its lifetime (a
    -- day meter lives days, not the month-long default of the settle
    -- script).
    local keep = string.format("%.0f", math.floor((ends[i] - now) / 1000) + expires[i])
    if redis.call("PEXPIRE", key, keep) == 0 then
      redis.call("HSET", key, "spent", 0)
      redis.call("PEXPIRE", key, keep)
    end
  end
  if not skip[i] then
    record[#record + 1] = k .. "\t" .. key .. "\t" .. string.format("%.0f", amounts[i])
  end
end
local expiry = now + lease
redis.call("HSET", KEYS[1], "d", table.concat(record, "\n"), "exp", string.format("%.0f", expiry))
local entry = ARGV[5 + 8 * n]
if entry and entry ~= "" then
  redis.call("HSET", KEYS[1], "e", entry)
end
redis.call("PEXPIRE", KEYS[1], string.format("%.0f", math.floor(lease / 1000) + 86400000))
redis.call("ZADD", KEYS[2], string.format("%.0f", expiry), ARGV[1])
return out
