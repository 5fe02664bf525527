#!lua flags=allow-oom
-- commit_many: after MySQL committed their invoices, move the units of
-- several orders of one SKU to sold, in one call. Each order is settled
-- exactly as lua/commit.lua settles it alone, in the order given.
-- KEYS[1] {sku:X}:avail   KEYS[2] {sku:X}:resv   KEYS[3] {sku:X}:sold
-- KEYS[3+i] {sku:X}:ord:<order_id i>, for i = 1..n
-- ARGV[1] order state TTL (s)
-- ARGV[2i] order_id i     ARGV[2i+1] qty i, for i = 1..n
-- Returns a list of n codes, one per order: 1 committed from the
-- reservation; 2 committed from avail (the reservation was lost in a
-- failover); 0 already committed (nothing changed for it). Returns -1
-- alone when the stock is not loaded (nothing changed for any order).
-- Like commit.lua it carries no fencing token: it only runs after MySQL's
-- fenced transaction said the order is invoiced, and an order's state C
-- makes every later call for it a no-op, so a late or repeated batch
-- cannot count a unit twice.
-- Runs even when memory is full: MySQL already sold the units, and Redis
-- must say so.
if not redis.call('GET', KEYS[1]) then return -1 end
local codes = {}
local sold = 0
for i = 1, #KEYS - 3 do
  local id, qty = ARGV[2 * i], tonumber(ARGV[2 * i + 1])
  if redis.call('GET', KEYS[3 + i]) == 'C' then
    codes[i] = 0
  else
    codes[i] = 1
    if redis.call('HDEL', KEYS[2], id) == 0 then
      -- MySQL is the truth: the units are sold whatever Redis remembers.
      redis.call('DECRBY', KEYS[1], qty)
      codes[i] = 2
    end
    sold = sold + qty
    redis.call('SET', KEYS[3 + i], 'C', 'EX', ARGV[1])
  end
end
if sold > 0 then redis.call('INCRBY', KEYS[3], sold) end
return codes
