-- reserve: move qty units of one SKU from avail to an open reservation.
-- KEYS[1] {sku:X}:avail   KEYS[2] {sku:X}:resv   KEYS[3] {sku:X}:ord:<order_id>
-- ARGV[1] order_id        ARGV[2] qty            ARGV[3] now (unix ms)
-- ARGV[4] order state TTL in seconds (the idempotency window)
-- Returns {code, avail}:
--   1 reserved now; 2 repeat of an accepted order (nothing changed);
--   0 sold out (remembered for the order); 3 repeat of a sold-out order;
--  -1 stock not loaded (the caller must not sell).
-- Idempotent per order id: go-redis retries timed-out scripts, and clients
-- retry requests.
local state = redis.call('GET', KEYS[3])
if state then
  if state == 'S' then return {3, 0} end
  return {2, 0}
end
local avail = redis.call('GET', KEYS[1])
if not avail then return {-1, 0} end
avail = tonumber(avail)
local qty = tonumber(ARGV[2])
if avail < qty then
  redis.call('SET', KEYS[3], 'S', 'EX', ARGV[4])
  return {0, avail}
end
redis.call('DECRBY', KEYS[1], qty)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. ':' .. ARGV[3])
redis.call('SET', KEYS[3], 'A', 'EX', ARGV[4])
return {1, avail - qty}
