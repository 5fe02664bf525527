-- gcra: one request against the budget kept in key, by the generic cell
-- rate algorithm (GCRA): the key holds the theoretical arrival time (TAT)
-- in microseconds of Redis's own clock, so every gateway instance shares
-- one budget whatever its clock says. The caller reads the key (tat, false
-- when missing) and the clock (now, from TIME) and passes them in: every
-- redis.call costs a few microseconds, and a caller that reads other keys
-- of the slot too gets them in the same MGET. interval is the
-- microseconds between requests at the sustained rate (1e6 / rate per
-- second), burst how many may arrive at once (>= 1). Returns 0 when the
-- request fits (and spends it), else the wait in microseconds until one
-- fits; a refused request changes nothing. lua/gcra.go puts this function
-- in front of the scripts that call it (ratelimit.lua, admit.lua).
local function gcra(key, tat, interval, burst, now)
  local tolerance = interval * (burst - 1)
  tat = tonumber(tat or now)
  if tat < now then tat = now end
  local allow_at = tat - tolerance
  if allow_at > now then
    return allow_at - now
  end
  local new_tat = tat + interval
  -- The key lives only while the budget is not full again.
  redis.call('SET', key, string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000) + 1)
  return 0
end
