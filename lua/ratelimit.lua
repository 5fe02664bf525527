-- ratelimit: one request against a subject's budget, by the generic cell
-- rate algorithm (GCRA): the key holds the theoretical arrival time (TAT)
-- in microseconds of Redis's own clock, so every gateway instance shares
-- one budget whatever its clock says.
-- KEYS[1] {rl:<subject>}
-- ARGV[1] emission interval: microseconds between requests at the
--         sustained rate (1e6 / rate per second)
-- ARGV[2] burst: how many requests may arrive at once (>= 1)
-- Returns {allowed (1|0), retry_after_us}: retry_after_us is 0 when allowed,
-- else the wait until one request fits again. A refused request changes
-- nothing.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = interval * (tonumber(ARGV[2]) - 1)
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local allow_at = tat - tolerance
if allow_at > now then
  return {0, allow_at - now}
end
local new_tat = tat + interval
-- The key lives only while the budget is not full again.
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000) + 1)
return {1, 0}
