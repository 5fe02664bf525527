#!lua
-- load: set a SKU's total stock, keeping sold units and open reservations,
-- never below them.
-- KEYS[1] {sku:X}:avail   KEYS[2] {sku:X}:resv   KEYS[3] {sku:X}:sold
-- KEYS[4] {sku:X}:stock  KEYS[5] {sku:X}:max (purchase limit per customer)
-- ARGV[1] stock           ARGV[2] units sold according to MySQL (used only
--                         when Redis has no sold counter yet)
-- ARGV[3] purchase limit per customer: '' keeps the current one, '0' clears
--         it, N > 0 sets it (applies to the reservations made from now on)
-- Returns {1, avail, sold, reserved} after the load, avail = stock - sold -
-- reserved >= 0, so avail + resv + sold == stock holds from the first
-- instant; or {0, 0, sold, reserved} when stock < sold + reserved: nothing
-- is written. Each open reservation is an order its request may have
-- answered accepted, so a stock below them would have MySQL refuse orders
-- already promised; the check and the set are one script, so no
-- reservation slips in between.
local stock = tonumber(ARGV[1])
local sold = redis.call('GET', KEYS[3])
local seed = not sold
sold = tonumber(sold or ARGV[2])
local reserved = 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do
  reserved = reserved + tonumber(string.match(v, '^(%d+)'))
end
if stock < sold + reserved then
  return {0, 0, sold, reserved}
end
if seed then
  redis.call('SET', KEYS[3], sold)
end
local avail = stock - sold - reserved
redis.call('SET', KEYS[4], stock)
if ARGV[3] == '0' then
  redis.call('DEL', KEYS[5])
elseif ARGV[3] ~= '' then
  redis.call('SET', KEYS[5], ARGV[3])
end
redis.call('SET', KEYS[1], avail)
return {1, avail, sold, reserved}
