-- The debit kinds and the partition's epoch field, as reserve.lua and
-- settle.lua spell them (prepended to both).
-- wire: the names below are mirrored in wire.go (wire_test.go keeps them equal)
local K_RATE = "r"
local K_CEILING = "c"
local K_SLIDING = "s"
local K_LOG = "g"
local K_CONCURRENCY = "n"
local K_METER = "m"
local EPOCH_FIELD = "!epoch"
-- end wire
