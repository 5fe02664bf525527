#!lua flags=no-writes
-- view: one consistent snapshot of a SKU's stock keys, with the master's
-- clock (reservation times are on it, so grace periods are measured on it).
-- KEYS[1] {sku:X}:avail   KEYS[2] {sku:X}:resv   KEYS[3] {sku:X}:sold
-- KEYS[4] {sku:X}:stock  KEYS[5] {sku:X}:max
-- Returns {stock|false, avail|false, sold|false, {order_id, reservation,
-- ...}, now_ms, max|false}.
local t = redis.call('TIME')
return {
  redis.call('GET', KEYS[4]),
  redis.call('GET', KEYS[1]),
  redis.call('GET', KEYS[3]),
  redis.call('HGETALL', KEYS[2]),
  tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000),
  KEYS[5] and redis.call('GET', KEYS[5]) or false,
}
