#!lua flags=allow-oom
-- commit: after MySQL committed the order's invoice, move its units to sold.
-- KEYS[1] {sku:X}:avail   KEYS[2] {sku:X}:resv   KEYS[3] {sku:X}:sold
-- KEYS[4] {sku:X}:ord:<order_id>
-- ARGV[1] order_id        ARGV[2] qty            ARGV[3] order state TTL (s)
-- Returns 1 committed from the reservation; 2 committed from avail (the
-- reservation was lost in a failover); 0 already
-- committed (nothing changed); -1 stock not loaded (nothing changed).
-- Runs even when memory is full: MySQL already sold the units, and Redis
-- must say so.
local state = redis.call('GET', KEYS[4])
if state == 'C' then return 0 end
if not redis.call('GET', KEYS[1]) then return -1 end
local qty = tonumber(ARGV[2])
local code = 1
if redis.call('HDEL', KEYS[2], ARGV[1]) == 0 then
  -- MySQL is the truth: the units are sold whatever Redis remembers, so
  -- take them from avail and keep avail + resv + sold == stock.
  redis.call('DECRBY', KEYS[1], qty)
  code = 2
end
redis.call('INCRBY', KEYS[3], qty)
redis.call('SET', KEYS[4], 'C', 'EX', ARGV[3])
return code
