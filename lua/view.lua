-- view: one consistent snapshot of a SKU's stock keys.
-- KEYS[1] {sku:X}:avail   KEYS[2] {sku:X}:resv   KEYS[3] {sku:X}:sold
-- KEYS[4] {sku:X}:stock
-- Returns {stock|false, avail|false, sold|false, {order_id, "qty:ms", ...}}.
return {
  redis.call('GET', KEYS[4]),
  redis.call('GET', KEYS[1]),
  redis.call('GET', KEYS[3]),
  redis.call('HGETALL', KEYS[2]),
}
