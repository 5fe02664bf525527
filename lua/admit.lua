-- admit: one order request against its customer, on the customer's slot:
-- the customer's rate limit (gcra, lua/gcra.lua) and then the
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
  local wait = gcra(KEYS[1], tonumber(ARGV[1]), burst)
  if wait > 0 then
    return {0, wait}
  end
end
return {1, redis.call('SET', KEYS[2], ARGV[3], 'NX', 'GET', 'PX', ARGV[4])}
