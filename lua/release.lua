-- release: return an order's reserved units to avail. Idempotent.
-- KEYS[1] {sku:X}:avail   KEYS[2] {sku:X}:resv   KEYS[3] {sku:X}:ord:<order_id>
-- ARGV[1] order_id
-- ARGV[2] mode: 'forget' (the publish failed: the order never existed, a
--         retry may reserve again) or 'reject' (the order ended rejected;
--         its state is kept so a retry is answered as before)
-- ARGV[3] order state TTL (s)
-- Returns the units released (0 when there was no reservation), or -1 when
-- the order is committed (nothing changed: sold units are never released).
local state = redis.call('GET', KEYS[3])
if state == 'C' then return -1 end
local released = 0
local r = redis.call('HGET', KEYS[2], ARGV[1])
if r then
  released = tonumber(string.match(r, '^(%d+)'))
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('INCRBY', KEYS[1], released)
end
if ARGV[2] == 'forget' then
  redis.call('DEL', KEYS[3])
else
  redis.call('SET', KEYS[3], 'X', 'EX', ARGV[3])
end
return released
