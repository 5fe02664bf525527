#!lua
-- load: set a SKU's total stock, keeping sold units and open reservations.
-- KEYS[1] {sku:X}:avail   KEYS[2] {sku:X}:resv   KEYS[3] {sku:X}:sold
-- KEYS[4] {sku:X}:stock
-- ARGV[1] stock           ARGV[2] units sold according to MySQL (used only
--                         when Redis has no sold counter yet)
-- Returns {avail, sold, reserved} after the load; avail = stock - sold -
-- reserved, so avail + resv + sold == stock holds from the first instant.
-- avail may be negative when reservations exceed the new stock: nothing
-- sells until they resolve, and MySQL refuses the excess.
local stock = tonumber(ARGV[1])
local sold = redis.call('GET', KEYS[3])
if sold then
  sold = tonumber(sold)
else
  sold = tonumber(ARGV[2])
  redis.call('SET', KEYS[3], sold)
end
local reserved = 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do
  reserved = reserved + tonumber(string.match(v, '^(%d+)'))
end
local avail = stock - sold - reserved
redis.call('SET', KEYS[4], stock)
redis.call('SET', KEYS[1], avail)
return {avail, sold, reserved}
