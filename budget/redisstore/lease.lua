-- Lease: one instance's batch for one partition, in one atomic step. For
-- each bucket it holds a slice of, it charges what the instance's requests
-- spent since its last call, gives back or takes more slice, and reports
-- the bucket as it is now. A slice counts in Redis as pending (a ceiling),
-- in flight (concurrency) or taken (a token bucket's TAT), so every other
-- instance's reservation already sees it as used: the ceiling holds across
-- instances by construction. The instance's slices are recorded in its
-- lessee hash, with an expiry in the lessee zset; if it dies, any
-- instance's sweeper charges them in full (lessee_expire.lua).
--
-- wire: the names below are mirrored in wire.go (wire_test.go keeps them equal)
local SLICE_FIELDS = 10
local REPLY_FIELDS = 7
-- end wire (the debit kinds K_* and EPOCH_FIELD: kinds.lua)
--
-- KEYS[1] lessee zset (instance → expiry µs)  KEYS[2] this instance's lessee
-- hash (bucket key → "kind\tslice\tspent": the slice held and all it has
-- spent so far, so a batch sent again after a lost reply charges nothing twice)  KEYS[3] the partition's meta hash
-- (run-time ceilings)  KEYS[4] the ledger stream  KEYS[4+i] bucket i
-- ARGV[1] instance id   ARGV[2] now µs or "" for Redis TIME
-- ARGV[3] lessee lifetime µs   ARGV[4] number of buckets n
-- ARGV[5] number of ledger entries e   ARGV[6] the partition's epoch as the
-- instance last saw it (0: not yet)
-- then SLICE_FIELDS values per bucket:
--   kind (K_CEILING, K_METER, K_CONCURRENCY, K_RATE),
--   spent: all the instance's requests have used of this bucket so far
--     (ceiling, meter: units settled; rate: µs of cost settled;
--     concurrency: 0); what the lessee hash has not seen yet is charged
--     for good (a correction can make it smaller, below zero on a record
--     made for it: a refund; a rate's is never refunded),
--   seen: what the instance knows the lessee hash has seen (0: nothing
--     yet). A record that is gone although it had seen spend was charged
--     in full by a sweeper (the instance did not renew in time): what was
--     spent out of that slice is not charged again — unless the epoch
--     changed: then Redis lost its data, and all the instance ever spent
--     of the bucket is charged again, as a spooled settlement would be,
--   target: the slice the instance wants to hold after this call (more is
--     given back; less is taken up to it, if there is room),
--   floor: the least slice worth holding after a take (a take that
--     leaves less is refused),
--   fallback: the slice to hold when a take is refused (the rest is given
--     back). All three are absolute, so a call sent on a stale view of
--     the slice still leaves what the instance asked for,
--   capacity (ceiling: the ceiling; concurrency: slots; rate: tolerance µs),
--   name (the field of a run-time ceiling in KEYS[3], or ""),
--   expiry ms of a key this makes, on the clock of now (period end + keep),
--   drop ("1": the instance is done with the bucket and has nothing
--     unflushed: nothing is charged, the slice is given back and its record
--     goes — safe to send again)
-- then e ledger entries, two values each: the entry (JSON) and its
-- outcome (the stream's o).
--
-- A take is at most the bucket's room divided among the live lessees plus
-- one (the instances' exact reservations), so near a ceiling slices shrink,
-- and a take that falls short of floor is refused: the instance then reserves
-- exactly, and no budget is stranded on an idle instance for longer than
-- its next call.
--
-- Returns {now, lessees, epoch, then REPLY_FIELDS values per bucket: slice now
-- held, tat, spent, pending, in-flight, run-time ceiling (-1: none), when
-- that ceiling lapses (unix µs; 0: never)}.

local n, e, ttl = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[3])
local known = tonumber(ARGV[6])
if not n or n < 1 or not e or e < 0 or not ttl or ttl <= 0 or not known or #KEYS ~= 4 + n or #ARGV ~= 6 + SLICE_FIELDS * n + 2 * e then
  return redis.error_reply("tollgate: lease: bad argument count")
end
local now = tonumber(ARGV[2])
if not now then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local ops, fields, names, nameOf = {}, {}, {EPOCH_FIELD}, {}
for i = 1, n do
  local b = 6 + SLICE_FIELDS * (i - 1)
  local op = {kind = ARGV[b + 1], spent = tonumber(ARGV[b + 2]),
    base = tonumber(ARGV[b + 3]), target = tonumber(ARGV[b + 4]), floor = tonumber(ARGV[b + 5]),
    fallback = tonumber(ARGV[b + 6]), cap = tonumber(ARGV[b + 7]), name = ARGV[b + 8], expiry = tonumber(ARGV[b + 9]),
    drop = ARGV[b + 10] == "1"}
  local k = op.kind
  if (k ~= K_CEILING and k ~= K_METER and k ~= K_CONCURRENCY and k ~= K_RATE) or not op.spent or not op.base
      or not op.target or op.target < 0 or not op.floor or op.floor < 0 or not op.fallback or op.fallback < 0
      or not op.cap or op.cap < 0 or not op.expiry then
    return redis.error_reply("tollgate: lease: bad bucket " .. i)
  end
  ops[i], fields[i] = op, KEYS[4 + i]
  if k == K_CEILING and op.name ~= "" then
    names[#names + 1] = op.name
    nameOf[i] = #names
  end
end
local held = redis.call("HMGET", KEYS[2], unpack(fields))
local meta = redis.call("HMGET", KEYS[3], unpack(names))
local epoch = tonumber(meta[1])
if not epoch then
  epoch = now
  redis.call("HSET", KEYS[3], EPOCH_FIELD, string.format("%.0f", now))
end
local lessees = redis.call("ZCOUNT", KEYS[1], string.format("%.0f", now), "+inf")

local function fmt(x) return string.format("%.0f", x) end
-- resize is how much slice g takes and gives to meet op, with room to
-- take from (shared among the lessees).
local function resize(op, g, room)
  if op.target < g then return 0, g - op.target end
  if MARK_FENCED then room = 0 end -- no new room is taken behind a fence (mark.lua)
  local taken = math.min(op.target - g, math.floor(math.max(0, room) / (lessees + 1)))
  if g + taken < op.floor then return 0, math.max(0, g - op.fallback) end
  return taken, 0
end

local out = {now, lessees, epoch}
for i = 1, n do
  local op, key = ops[i], KEYS[4 + i]
  local g, seen = string.match(held[i] or "", "^%a\t(%d+)\t(-?%d+)$")
  g, seen = tonumber(g or "0"), tonumber(seen or "0")
  op.spend = op.spent - seen -- what this batch charges: none if it was charged before
  if op.drop or (not held[i] and op.base > 0 and epoch == known) then
    op.spend = 0 -- a drop has nothing unflushed; a swept record was charged in full
  end
  local tat, spent, pending, flight, ovr, untl = 0, 0, 0, 0, -1, 0
  if op.kind == K_CEILING then
    local v = redis.call("HMGET", key, "spent", "pending")
    local fresh = not v[1] and not v[2]
    spent, pending = tonumber(v[1] or "0"), tonumber(v[2] or "0")
    local o, ou
    if nameOf[i] then o, ou = override(meta[nameOf[i]], now) end
    local cap = op.cap
    if o then
      ovr, cap, untl = o, o, ou
    end
    if op.spend > 0 then
      local dec = math.min(op.spend, g)
      spent, pending, g = spent + op.spend, pending - dec, g - dec
    elseif op.spend < 0 then
      spent = math.max(0, spent + op.spend)
    end
    local taken, given = resize(op, g, cap - spent - pending)
    pending, g = math.max(0, pending + taken - given), g + taken - given
    redis.call("HSET", key, "spent", fmt(spent), "pending", fmt(pending))
    if fresh then redis.call("PEXPIRE", key, fmt(math.max(1000, op.expiry - math.floor(now / 1000)))) end
  elseif op.kind == K_METER then
    if op.spend ~= 0 then
      spent = redis.call("HINCRBY", key, "spent", fmt(op.spend))
      if spent == op.spend then redis.call("PEXPIRE", key, fmt(math.max(1000, op.expiry - math.floor(now / 1000)))) end
    end
  elseif op.kind == K_CONCURRENCY then
    flight = tonumber(redis.call("GET", key) or "0")
    local taken, given = resize(op, g, op.cap - flight)
    flight, g = math.max(0, flight + taken - given), g + taken - given
    if flight > 0 then redis.call("SET", key, fmt(flight)) else redis.call("DEL", key) end
  else -- K_RATE: a slice is cost taken ahead; what was spent of it is gone
    tat = math.max(tonumber(redis.call("GET", key) or "0"), now)
    local spend = math.max(0, op.spend)
    local dec = math.min(spend, g)
    tat, g = tat + spend - dec, g - dec -- spend past the slice is debt
    local taken, given = resize(op, g, now + op.cap - tat)
    tat, g = math.max(now, tat + taken - given), g + taken - given
    if tat > now then
      redis.call("SET", key, fmt(tat), "PX", math.floor((tat - now) / 1000) + 1000)
    else
      redis.call("DEL", key)
    end
  end
  if g > 0 or not op.drop then
    redis.call("HSET", KEYS[2], key, op.kind .. "\t" .. fmt(g) .. "\t" .. fmt(op.spent))
  elseif held[i] then
    redis.call("HDEL", KEYS[2], key)
  end
  for _, x in ipairs({g, tat, spent, pending, flight, ovr, untl}) do out[#out + 1] = x end
end
for j = 1, e do
  local b = 6 + SLICE_FIELDS * n + 2 * (j - 1)
  redis.call("XADD", KEYS[4], "*", "r", ARGV[b + 1], "o", ARGV[b + 2])
end
if redis.call("EXISTS", KEYS[2]) == 1 then
  redis.call("ZADD", KEYS[1], fmt(now + ttl), ARGV[1])
else
  redis.call("ZREM", KEYS[1], ARGV[1])
end
return out
