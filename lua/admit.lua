-- admit: one order request against its customer, on the customer's slot:
-- the customer's rate limit (GCRA, as lua/ratelimit.lua) and then the
-- order's idempotency claim, so admitting an order costs one round trip.
-- KEYS[1] {cust:TAG}:rl:<customer>   theoretical arrival time, microseconds
-- KEYS[2] {cust:TAG}:idem:<order_id> fingerprint of the creating request
-- ARGV[1] emission interval: microseconds between requests at the
--         sustained rate (1e6 / rate per second)
-- ARGV[2] burst: requests that may arrive at once; 0 turns the limit off
-- ARGV[3] fingerprint of this request
-- ARGV[4] idempotency record TTL, milliseconds
-- Returns {0, retry_after_us} when the budget is empty (nothing written),
-- {1, false} when this request created the record, {1, old_fingerprint}
-- when a record existed (left unchanged).
local burst = tonumber(ARGV[2])
if burst > 0 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local interval = tonumber(ARGV[1])
  local tolerance = interval * (burst - 1)
  local tat = tonumber(redis.call('GET', KEYS[1]) or now)
  if tat < now then tat = now end
  local allow_at = tat - tolerance
  if allow_at > now then
    return {0, allow_at - now}
  end
  local new_tat = tat + interval
  -- The budget key lives only while the budget is not full again.
  redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000) + 1)
end
return {1, redis.call('SET', KEYS[2], ARGV[3], 'NX', 'GET', 'PX', ARGV[4])}
