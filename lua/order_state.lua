#!lua flags=no-writes
-- order_state: an order's state on its SKU's slot and the age of its open
-- reservation, by this master's clock (the clock that stamped it).
-- KEYS[1] {sku:X}:resv   KEYS[2] {sku:X}:ord:<order_id>
-- ARGV[1] order_id
-- Returns {state or '', age in ms, or -1 when the order holds no
-- reservation}. Reads only: the status of an order costs no write.
local state = redis.call('GET', KEYS[2]) or ''
local r = redis.call('HGET', KEYS[1], ARGV[1])
if not r then return {state, -1} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local at = tonumber(string.match(r, '^%d+:(%d+)'))
if not at then return {state, -1} end
return {state, math.max(now - at, 0)}
