-- Reserve: check every debit of one reservation and, only if all fit, apply
-- them all and record the reservation as an open lease. All keys share one
-- hash tag (the partition), so the script runs on one node of a cluster.
-- Each bucket is read once and written once; a key gets its lifetime when
-- it is made, not on every call.
--
-- wire: the names below are mirrored in wire.go (wire_test.go keeps them equal)
local ALLOWED = 1
local REFUSED = 0
local DUPLICATE = -1
local OUT_OF_PERIOD = -2
local FENCED = -3
local DEBIT_FIELDS = 8
-- end wire (the debit kinds K_* and EPOCH_FIELD: kinds.lua)
--
-- KEYS[1] open reservations (hash: id → record)   KEYS[2] lease zset (score: expiry µs)
-- KEYS[3] the partition's meta hash: run-time ceilings (bucket → amount) and
--         the partition's epoch (EPOCH_FIELD: Redis TIME µs when it was made)
-- KEYS[3+i] the bucket of debit i
-- ARGV[1] reservation id    ARGV[2] lease µs    ARGV[3] now µs, or "" for Redis TIME
-- ARGV[4] number of debits n
-- ARGV[5] the ledger entry the sweeper appends if the lease expires unsettled ("": none)
-- ARGV[6] "1": a restore — a reservation Redis acknowledged and then lost
--   (mark.lua) is taken again without a check, since its request was
--   admitted and may be under way; "0" otherwise
-- then DEBIT_FIELDS values per debit:
--   kind (K_RATE token bucket, K_CEILING ceiling or fixed window, K_SLIDING
--   sliding window, K_LOG sliding log, K_CONCURRENCY, K_METER: a ceiling key
--   that is only recorded here and charged at settlement),
--   amount (rate: cost in µs of the bucket; ceiling: units; concurrency: 1),
--   capacity (rate: tolerance µs; ceiling: the ceiling; concurrency: slots),
--   period start µs and end µs (ceiling; for K_LOG the window µs and 0;
--   0 0 otherwise),
--   bucket name (the field of a run-time ceiling in KEYS[3]; for K_SLIDING
--   the previous window's key, in the same slot),
--   shadow ("1": evaluated, never refuses, not taken when it would refuse),
--   keep ms: how long a new bucket key outlives its period's end (ceiling,
--   window, meter) or now (log). Relative, so a test's pinned clock and
--   Redis's own agree on it.
--
-- The record of an open reservation is its entry (may be empty) on the
-- first line, then one line per debit taken: kind, key, amount and, for a
-- meter, when its key expires if settlement makes it (ms on the clock of
-- now: the period's end plus keep).
--
-- Returns {status, now, epoch, then 5 values per debit as read before any
-- write: tat, spent, pending, in-flight, run-time ceiling (-1: none)}.
-- status: ALLOWED, REFUSED, DUPLICATE (the id is open), OUT_OF_PERIOD (a
-- ceiling's period does not contain now: the caller recomputes periods from
-- the returned now and calls again), FENCED (the partition is behind a
-- failover fence, mark.lua: nothing is taken; a restore still is).

local n = tonumber(ARGV[4])
if not n or n < 0 or #KEYS ~= 3 + n or #ARGV ~= 6 + DEBIT_FIELDS * n then
  return redis.error_reply("tollgate: reserve: bad argument count")
end
local lease = tonumber(ARGV[2])
if not lease or lease <= 0 then
  return redis.error_reply("tollgate: reserve: bad lease")
end
local restore = ARGV[6] == "1"
local now = tonumber(ARGV[3])
if not now then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Validate every argument before the first write.
local kinds, amounts, caps, starts, ends, names, shadows, keeps = {}, {}, {}, {}, {}, {}, {}, {}
local metaFields, metaOf = {EPOCH_FIELD}, {}
for i = 1, n do
  local b = 6 + DEBIT_FIELDS * (i - 1)
  local k = ARGV[b + 1]
  kinds[i] = k
  amounts[i], caps[i] = tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])
  starts[i], ends[i], names[i] = tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5]), ARGV[b + 6]
  shadows[i], keeps[i] = ARGV[b + 7] == "1", tonumber(ARGV[b + 8])
  if (k ~= K_RATE and k ~= K_CEILING and k ~= K_SLIDING and k ~= K_LOG and k ~= K_CONCURRENCY and k ~= K_METER)
      or not amounts[i] or amounts[i] < 0 or not caps[i] or caps[i] < 0
      or not starts[i] or not ends[i] or not keeps[i] then
    return redis.error_reply("tollgate: reserve: bad debit " .. i)
  end
  if (k == K_CEILING or k == K_SLIDING or k == K_METER) and (now < starts[i] or now >= ends[i]) then
    return {OUT_OF_PERIOD, now, 0}
  end
  if k == K_CEILING and names[i] ~= "" then
    metaFields[#metaFields + 1] = names[i]
    metaOf[i] = #metaFields
  end
end
if redis.call("HEXISTS", KEYS[1], ARGV[1]) == 1 then
  return {DUPLICATE, now, 0}
end
if MARK_FENCED and not restore then
  return {FENCED, now, 0}
end
local meta = redis.call("HMGET", KEYS[3], unpack(metaFields))
local epoch = tonumber(meta[1])

local out = {ALLOWED, now, epoch or now}
local allowed = true
local skip = {} -- shadow debits that would refuse: not taken
local tats, fresh = {}, {}
for i = 1, n do
  local key, k = KEYS[3 + i], kinds[i]
  local tat, spent, pending, flight, ovr = 0, 0, 0, 0, -1
  if k == K_RATE then
    tat = tonumber(redis.call("GET", key) or "0")
    local from = math.max(tat, now)
    if amounts[i] > caps[i] or from + amounts[i] - now > caps[i] then skip[i] = true end
  elseif k == K_CEILING then
    local v = redis.call("HMGET", key, "spent", "pending")
    fresh[i] = not v[1] and not v[2]
    spent, pending = tonumber(v[1] or "0"), tonumber(v[2] or "0")
    local o = metaOf[i] and override(meta[metaOf[i]], now)
    if o then ovr = o; caps[i] = o end
    if amounts[i] > caps[i] - spent - pending then skip[i] = true end
  elseif k == K_SLIDING then
    local v = redis.call("HMGET", key, "spent", "pending")
    fresh[i] = not v[1] and not v[2]
    spent, pending = tonumber(v[1] or "0"), tonumber(v[2] or "0")
    local p = redis.call("HMGET", names[i], "spent", "pending")
    local prev = tonumber(p[1] or "0") + tonumber(p[2] or "0")
    local w = ends[i] - starts[i]
    -- the same float64 expression as budget.SlidingWeight
    local weighted = math.floor(prev * (w - (now - starts[i])) / w)
    if amounts[i] > caps[i] or amounts[i] > caps[i] - spent - pending - weighted then skip[i] = true end
    tat = prev -- reported in the first counter slot
  elseif k == K_LOG then
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
  elseif k == K_CONCURRENCY then
    flight = tonumber(redis.call("GET", key) or "0")
    if flight + amounts[i] > caps[i] then skip[i] = true end
  end -- K_METER: nothing to read or check
  if skip[i] and not shadows[i] and not restore then allowed = false end
  tats[i] = tat
  out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4], out[#out + 5] = tat, spent, pending, flight, ovr
end
if not allowed then
  out[1] = REFUSED
  return out
end

local record = {ARGV[5]}
for i = 1, n do
  local key, k = KEYS[3 + i], kinds[i]
  local line = k .. "\t" .. key .. "\t" .. string.format("%.0f", amounts[i])
  if skip[i] then
    line = nil -- a shadow limit that would have refused: counted by the caller, not taken
  elseif k == K_RATE then
    local tat = math.max(tats[i], now) + amounts[i]
    -- The key lives until the bucket is full again, then reads as missing.
    redis.call("SET", key, string.format("%.0f", tat), "PX", math.floor((tat - now) / 1000) + 1000)
  elseif k == K_LOG then
    redis.call("ZADD", key, string.format("%.0f", now), ARGV[1])
    redis.call("HSET", key .. ":amt", ARGV[1], string.format("%.0f", amounts[i]))
    redis.call("PEXPIRE", key, string.format("%.0f", keeps[i]))
    redis.call("PEXPIRE", key .. ":amt", string.format("%.0f", keeps[i]))
  elseif k == K_CEILING or k == K_SLIDING then
    redis.call("HINCRBY", key, "pending", string.format("%.0f", amounts[i]))
    if fresh[i] then
      redis.call("PEXPIRE", key, string.format("%.0f", math.floor((ends[i] - now) / 1000) + keeps[i]))
    end
  elseif k == K_CONCURRENCY then
    -- No expiry: the count returns to zero (and the key goes) when the
    -- last holder settles or is swept, so a busy bucket never resets.
    redis.call("INCRBY", key, string.format("%.0f", amounts[i]))
  elseif k == K_METER then
    -- Charged at settlement, which gives a key it makes its lifetime.
    line = line .. "\t" .. string.format("%.0f", math.floor(ends[i] / 1000) + keeps[i])
  end
  if line then record[#record + 1] = line end
end
redis.call("HSET", KEYS[1], ARGV[1], table.concat(record, "\n"))
redis.call("ZADD", KEYS[2], string.format("%.0f", now + lease), ARGV[1])
if not epoch then
  redis.call("HSET", KEYS[3], EPOCH_FIELD, string.format("%.0f", now))
end
return out
