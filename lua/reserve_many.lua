#!lua
-- reserve_many: reserve for several orders of one SKU in one call, each as
-- lua/reserve.lua reserves it alone, one after the other in KEYS order
-- (stock.Reserver sends the reserves of a SKU that arrive while its call is
-- in flight together). The codes, the states, the undo marks and the
-- limit are reserve.lua's, per order; the shebang makes Redis refuse the
-- whole call when memory is full, never part of it.
-- KEYS[1] {sku:X}:avail   KEYS[2] {sku:X}:resv   KEYS[3] {sku:X}:max
-- then for each order i = 0, 1, ...: KEYS[4+3i] {sku:X}:ord:<order_id>
--   KEYS[5+3i] {sku:X}:undone:<order_id>   KEYS[6+3i] {sku:X}:cust:<customer_id>
-- ARGV[1] order state TTL in seconds; then for each order i: ARGV[2+5i]
--   order_id, ARGV[3+5i] qty, ARGV[4+5i] nonce, ARGV[5+5i] customer_id,
--   ARGV[6+5i] '1' for a new claim, '0' for a retry
-- Returns {code, avail} of each order, flattened in KEYS order.
--@reserve_fn
local out = {}
for i = 0, (#KEYS - 3) / 3 - 1 do
  local k, a = 4 + 3 * i, 2 + 5 * i
  out[2 * i + 1], out[2 * i + 2] = reserve(KEYS[1], KEYS[2], KEYS[k], KEYS[k + 1], KEYS[3], KEYS[k + 2],
    ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[1], ARGV[a + 4])
end
return out
