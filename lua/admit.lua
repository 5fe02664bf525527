#!lua
-- admit: one order request against its customer, on the customer's slot:
-- the customer's rate limit (gcra, lua/gcra.lua) and then the order's
-- idempotency claim, so admitting an order costs one round trip.
-- KEYS[1]    {cust:TAG}:rl:<customer>   theoretical arrival time, microseconds
-- KEYS[2..4] {cust:TAG}:idem:<order_id> the records the request's order id
--            would have in the windows before, at and after the caller's
--            (order.IDFor, order.Window): a live record is in one of them
-- ARGV[1] emission interval: microseconds between requests at the
--         sustained rate (1e6 / rate per second)
-- ARGV[2] burst: requests that may arrive at once; 0 turns the limit off
-- ARGV[3] what to record: the request's fingerprint, '!'-prefixed when
--         it is answered sold out
-- ARGV[4] idempotency record TTL, milliseconds
-- ARGV[5] nonce of this call: a record holding it was made by this very
--         call, whose reply was lost (go-redis retries a timed-out script)
-- Records are "<ARGV[3]>#<nonce>". Returns {0, retry_after_us} when the
-- budget is empty (nothing written); else {1, i, old}: the record is
-- KEYS[1 + i], old is false when this call created it (at KEYS[3]), or
-- the record found (left unchanged).
local function find()
  for i = 2, 4 do
    local v = redis.call('GET', KEYS[i])
    if v then return i, v end
  end
end
local i, v = find()
if v and string.match(v, '#([^#]*)$') == ARGV[5] then
  return {1, i - 1, false}
end
local burst = tonumber(ARGV[2])
if burst > 0 then
  local wait = gcra(KEYS[1], tonumber(ARGV[1]), burst)
  if wait > 0 then
    return {0, wait}
  end
end
if v then
  return {1, i - 1, v}
end
redis.call('SET', KEYS[3], ARGV[3] .. '#' .. ARGV[5], 'PX', ARGV[4])
return {1, 2, false}
