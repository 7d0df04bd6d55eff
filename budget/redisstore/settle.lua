-- Settle: resolve one reservation, at most once. Moves each ceiling's
-- reserved amount from pending to the actual spend, shifts each rate bucket
-- by the difference between actual and reserved cost (a refund, or debt),
-- frees concurrency slots and deletes the reservation's record: a settled
-- reservation leaves nothing behind. When it resolves the reservation now it
-- also appends the ledger entry to the org's ledger stream: the entry exists
-- exactly when the spend does.
--
-- wire: the names below are mirrored in wire.go (wire_test.go keeps them equal)
local UNKNOWN = 0
local SETTLED = 1
local SETTLED_BEFORE = 2
local EXPIRED = 3
local WITHOUT_RECORD = 4
local CORRECTED = 5
local MODE_SETTLE = 1
local MODE_UNRESERVED = 2
local MODE_EXPIRE = 3
-- end wire (the debit kinds K_* and EPOCH_FIELD: kinds.lua)
--
-- KEYS[1] open reservations (hash), KEYS[2] lease zset, KEYS[3] tombstone,
-- KEYS[4] ledger stream, KEYS[5] the partition's meta hash (its epoch),
-- KEYS[6] the record as versions before 0.8 kept it (a hash of its own)
-- ARGV[1] reservation id, ARGV[2] now µs or "" for Redis TIME,
-- ARGV[3] tombstone TTL ms, ARGV[4] mode: MODE_SETTLE, MODE_UNRESERVED
-- (spend made without a reservation while the store was unreachable: there
-- is no record by design) or MODE_EXPIRE (the sweeper charges the reserved
-- amounts), ARGV[5] the ledger entry (JSON) or "", ARGV[6] the partition's
-- epoch when the reservation was made (0: not known), ARGV[7] number of
-- actual values m, then m values in debit order (ceiling: actual units;
-- rate: actual cost µs minus reserved cost µs; concurrency: ignored).
-- m = 0 charges the reserved amounts (the sweeper). Then, optionally, m
-- kinds and m bucket keys: what to charge when the record is gone but the
-- partition's epoch says Redis lost its data meanwhile (a settlement that
-- waited in a spool). Ceilings are then charged their actual spend; rate and
-- concurrency state went with the data.
--
-- A record deleted by its settlement is told from one Redis lost by the
-- epoch: the same epoch means it was settled. Only three outcomes keep a
-- tombstone (KEYS[3], for ARGV[3] ms): a sweep ("3\n" then the record's
-- debit lines, so a late settlement can correct the sweep's charge to the
-- actual amounts, once: then "5"), unreserved spend and a settlement
-- without its record ("4": so a replay does not charge twice).
--
-- Stream entries: r the entry as the gateway wrote it, o the outcome.
--
-- Returns {outcome}: SETTLED now, SETTLED_BEFORE, EXPIRED (charged in full
-- by the sweeper), WITHOUT_RECORD (charged from the call), CORRECTED a
-- sweep, or UNKNOWN id.

local m = tonumber(ARGV[7])
local ttl = tonumber(ARGV[3])
local mode = tonumber(ARGV[4])
local record = ARGV[5]
local epoch = tonumber(ARGV[6])
if not m or m < 0 or (#ARGV ~= 7 + m and #ARGV ~= 7 + 3 * m) or not ttl or ttl <= 0 or not epoch
  or (mode ~= MODE_SETTLE and mode ~= MODE_UNRESERVED and mode ~= MODE_EXPIRE) then
  return redis.error_reply("tollgate: settle: bad arguments")
end
local actual = {}
for i = 1, m do
  actual[i] = tonumber(ARGV[7 + i])
  if not actual[i] then return redis.error_reply("tollgate: settle: bad actual " .. i) end
end
local function ledger(outcome, entry)
  if entry and entry ~= "" then
    redis.call("XADD", KEYS[4], "*", "r", entry, "o", outcome)
  end
end
local function parse(lines)
  local debits = {}
  for line in string.gmatch(lines, "[^\n]+") do
    local k, key, amount, keep = string.match(line, "^(%a)\t([^\t]+)\t(%d+)\t?(%d*)$")
    if not k then return nil end
    debits[#debits + 1] = {k, key, tonumber(amount), tonumber(keep)}
  end
  return debits
end
local function now()
  local t = tonumber(ARGV[2])
  if t then return t end
  t = redis.call("TIME")
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- count adds to a meter, giving a key it makes its lifetime (keep: ms on
-- the clock of now, or nil: past any period).
local function count(key, spent, keep, at)
  if spent <= 0 then return end
  if redis.call("HINCRBY", key, "spent", string.format("%.0f", spent)) == spent then
    local ms = 41 * 86400000
    if keep then ms = math.max(1000, keep - math.floor(at / 1000)) end
    redis.call("PEXPIRE", key, string.format("%.0f", ms))
  end
end

local entry, d = "", redis.call("HGET", KEYS[1], ARGV[1])
if d then
  entry, d = string.match(d, "^([^\n]*)\n?(.*)$")
elseif mode ~= MODE_UNRESERVED then
  local old = redis.call("HMGET", KEYS[6], "d", "e")
  if old[1] then d, entry = old[1], old[2] or "" end
end

if not d then
  local done = redis.call("GET", KEYS[3])
  if done then
    local code, swept = string.match(done, "^(%d+)\n?(.*)$")
    code = tonumber(code)
    if code == EXPIRED and mode == MODE_SETTLE and m > 0 and swept ~= "" then
      -- The sweeper charged this reservation in full (its debits kept in
      -- the tombstone); this late settlement corrects that charge to the
      -- actual amounts, once: the same steps as budget.CorrectSwept.
      local debits = parse(swept)
      if not debits or #debits ~= m then return {EXPIRED} end
      for i, debit in ipairs(debits) do
        local k, key, reserved = debit[1], debit[2], debit[3]
        if (k == K_CEILING or k == K_SLIDING or k == K_METER) and actual[i] ~= reserved then
          if actual[i] < 0 then return redis.error_reply("tollgate: settle: negative actual " .. i) end
          local spent = tonumber(redis.call("HGET", key, "spent") or "0")
          redis.call("HSET", key, "spent", string.format("%.0f", math.max(0, spent + actual[i] - reserved)))
        elseif k == K_LOG and redis.call("HEXISTS", key .. ":amt", ARGV[1]) == 1 then
          redis.call("HSET", key .. ":amt", ARGV[1], string.format("%.0f", actual[i]))
        end
      end
      redis.call("SET", KEYS[3], CORRECTED, "KEEPTTL")
      ledger(CORRECTED, record)
      return {CORRECTED}
    end
    if code == SETTLED or code == CORRECTED or code == WITHOUT_RECORD then return {SETTLED_BEFORE} end
    return {code}
  end
  if mode == MODE_EXPIRE then
    redis.call("ZREM", KEYS[2], ARGV[1]) -- a lease whose record is gone: nothing to charge
    return {UNKNOWN}
  end
  if mode == MODE_SETTLE and epoch > 0 and tonumber(redis.call("HGET", KEYS[5], EPOCH_FIELD)) == epoch then
    return {SETTLED_BEFORE} -- the record went with its settlement, not with Redis's data
  end
  if #ARGV ~= 7 + 3 * m or m == 0 then return {UNKNOWN} end
  local at = now()
  for i = 1, m do
    local k, key = ARGV[7 + m + i], ARGV[7 + 2 * m + i]
    if k == K_CEILING or k == K_METER then
      if actual[i] < 0 then return redis.error_reply("tollgate: settle: negative actual " .. i) end
      count(key, actual[i], nil, at)
    end
  end
  redis.call("ZREM", KEYS[2], ARGV[1])
  redis.call("SET", KEYS[3], WITHOUT_RECORD, "PX", ttl)
  ledger(WITHOUT_RECORD, record)
  return {WITHOUT_RECORD}
end

local debits = parse(d)
if not debits then return redis.error_reply("tollgate: settle: bad record") end
if m ~= 0 and m ~= #debits then
  return redis.error_reply("tollgate: settle: " .. m .. " actual values for " .. #debits .. " debits")
end
for i = 1, m do
  if (debits[i][1] == K_CEILING or debits[i][1] == K_METER) and actual[i] < 0 then
    return redis.error_reply("tollgate: settle: negative actual " .. i)
  end
end
local at = now()

for i, debit in ipairs(debits) do
  local k, key, reserved = debit[1], debit[2], debit[3]
  local used = reserved
  if m > 0 then used = actual[i] end
  if k == K_RATE then
    local delta = 0
    if m > 0 then delta = actual[i] end
    if delta ~= 0 then
      local tat = tonumber(redis.call("GET", key) or "0")
      tat = math.max(math.max(tat, at) + delta, at)
      if tat > at then
        redis.call("SET", key, string.format("%.0f", tat), "PX", math.floor((tat - at) / 1000) + 1000)
      else
        redis.call("DEL", key)
      end
    end
  elseif k == K_LOG then
    if m > 0 then
      if actual[i] > 0 then
        redis.call("HSET", key .. ":amt", ARGV[1], string.format("%.0f", actual[i]))
      else
        redis.call("ZREM", key, ARGV[1])
        redis.call("HDEL", key .. ":amt", ARGV[1])
      end
    end
  elseif k == K_CEILING or k == K_SLIDING then
    if redis.call("HINCRBY", key, "pending", string.format("%.0f", -reserved)) < 0 then
      redis.call("HSET", key, "pending", 0)
    end
    redis.call("HINCRBY", key, "spent", string.format("%.0f", used))
  elseif k == K_METER then
    -- A meter: nothing was reserved; the spend is counted now.
    count(key, used, debit[4], at)
  elseif redis.call("DECRBY", key, string.format("%.0f", reserved)) <= 0 then
    redis.call("DEL", key) -- K_CONCURRENCY: the last holder is gone
  end
end
if redis.call("HDEL", KEYS[1], ARGV[1]) == 0 then
  redis.call("DEL", KEYS[6])
end
redis.call("ZREM", KEYS[2], ARGV[1])
if mode == MODE_EXPIRE then
  ledger(EXPIRED, entry)
  -- Keep what was charged, so a settlement that comes late can correct it.
  redis.call("SET", KEYS[3], EXPIRED .. "\n" .. d, "PX", ttl)
else
  ledger(SETTLED, record)
end
return {SETTLED}
