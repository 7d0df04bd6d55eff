-- override(v, now): the run-time ceiling in force at now, as HGET returned
-- it — "amount", or "amount@until" with until in unix µs, followed by ";"
-- and the changes it lapses to, latest first (setceiling.lua writes them) —
-- and when that one lapses (0: never); nil when none is in force. Prepended
-- to the scripts that read ceilings.
local function override(v, now)
  if not v then return nil end
  for step in string.gmatch(v, "[^;]+") do
    local amount, untl = string.match(step, "^(%d+)@(%d+)$")
    if not amount then return tonumber(step), 0 end
    if now < tonumber(untl) then return tonumber(amount), tonumber(untl) end
  end
  return nil
end
