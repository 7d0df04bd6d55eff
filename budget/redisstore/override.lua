-- override(v, now): the amount of a run-time ceiling as HGET returned it —
-- "amount", or "amount@until" with until in unix µs — or nil when there is
-- none or it has expired. Prepended to the scripts that read ceilings.
local function override(v, now)
  if not v then return nil end
  local amount, untl = string.match(v, "^(%d+)@(%d+)$")
  if not amount then return tonumber(v) end
  if now >= tonumber(untl) then return nil end
  return tonumber(amount)
end
