-- Write marks and the failover fence. Every script that writes a
-- partition's budgets on the request path (reserve, settle, lease) runs
-- inside this frame: its body is wrapped in the function body() below. The
-- caller appends one key and four arguments, which the body never sees:
-- KEYS[#KEYS] the partition's meta hash, ARGV[#ARGV - 3] the calling
-- instance's mark field, ARGV[#ARGV - 2] the highest mark Redis has
-- acknowledged to that instance, ARGV[#ARGV - 1] how long a fence lasts
-- (ms), ARGV[#ARGV] "1" for a replay of a lost write (never fenced: it
-- restores room that was taken) or "0".
--
-- A mark only grows, only its own instance moves it, and it moves in the
-- same atomic step as the writes it marks; Redis replicates a script's
-- writes in order, as one transaction. So a mark below what was
-- acknowledged proves Redis lost acknowledged writes of that instance — a
-- failover to a replica that lagged, a restart without its data — and
-- which ones: those marked above it. The script then writes nothing and
-- says so; the caller replays what was lost (marks.go), then calls again.
-- A missing record is never taken for a settled or swept one while a lost
-- write could explain it.
--
-- Only the instance that lost a write can find it, at its next call. Until
-- every instance has made one, what the lost writes held (a reservation's
-- pending amount, a leased slice) would look free to the others. So a
-- partition raises a fence when its node is not the one that last wrote it
-- (the replication id in INFO differs from the one the partition keeps: a
-- promoted replica, a restart) and when a call finds a loss: for the
-- fence's time no new room is taken — reservations are refused
-- (reserve.lua's FENCED), leases take no slice — while settlements,
-- flushes and replays go on. When an instance finds that Redis lost the
-- whole partition (its epoch is gone), the fence holds until the partition
-- is rebuilt from the ledger (unfence.lua), or a minute at most.
--
-- wire: the names below are mirrored in wire.go (wire_test.go keeps them equal)
local MARK_LOST = -100
local FENCE_FIELD = "!fence"
local REPLID_FIELD = "!replid"
-- end wire
--
-- Returns the body's reply with the new mark appended, or {MARK_LOST, the
-- mark Redis holds, the partition's epoch (0: none; another epoch than the
-- instance saw: Redis lost all of the partition, not only its last writes)}.
local MARK_META, MARK_FIELD, MARK_REPLAY = KEYS[#KEYS], ARGV[#ARGV - 3], ARGV[#ARGV] == "1"
local MARK_KNOWN, MARK_FENCE_MS = tonumber(ARGV[#ARGV - 2]), tonumber(ARGV[#ARGV - 1])
if not MARK_META or not MARK_FIELD or not MARK_KNOWN or not MARK_FENCE_MS then
  return redis.error_reply("tollgate: mark: bad arguments")
end
local function mark_now()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local MARK_STATE = redis.call("HMGET", MARK_META, REPLID_FIELD, FENCE_FIELD, "!epoch")
local MARK_REPLID = string.match(redis.call("INFO", "replication"), "master_replid:(%w+)")
local MARK_FENCED = false
if MARK_STATE[2] then
  if tonumber(MARK_STATE[2]) > mark_now() then
    MARK_FENCED = true
  else
    redis.call("HDEL", MARK_META, FENCE_FIELD)
  end
end
if MARK_STATE[1] ~= MARK_REPLID then
  if MARK_STATE[3] then
    -- State written by another node: fence it.
    redis.call("HSET", MARK_META, FENCE_FIELD, string.format("%.0f", mark_now() + MARK_FENCE_MS * 1000))
    MARK_FENCED = true
  end
  redis.call("HSET", MARK_META, REPLID_FIELD, MARK_REPLID)
end
if MARK_REPLAY then MARK_FENCED = false end
-- One command in the common case: the mark moves first, and a loss is
-- found from where it moved from. A call that finds a loss moves it back,
-- so another call of the same instance finds the same mark held.
local MARK_NEW = redis.call("HINCRBY", MARK_META, MARK_FIELD, 1)
if MARK_NEW - 1 < MARK_KNOWN then
  redis.call("HINCRBY", MARK_META, MARK_FIELD, -1)
  local until_ms = MARK_FENCE_MS
  if not MARK_STATE[3] then until_ms = 60000 end -- the whole partition: until it is rebuilt
  local at = mark_now() + until_ms * 1000
  if not MARK_STATE[2] or tonumber(MARK_STATE[2]) < at then
    redis.call("HSET", MARK_META, FENCE_FIELD, string.format("%.0f", at))
  end
  return {MARK_LOST, MARK_NEW - 1, tonumber(MARK_STATE[3] or "0")}
end
local function body(KEYS, ARGV)
