#!lua flags=no-writes
-- sighting: what a gateway needs to answer orders for a SKU "sold out"
-- without the reserve script, read in one call for a batch of orders: the
-- units left, and for each order id a key could name whether an order of
-- that id was reserved (taken, or possibly taken). It writes nothing, so a
-- refusal costs no key and no write, and it answers on a full node.
-- KEYS[1]    {sku:X}:avail
-- KEYS[2..n] {sku:X}:ord:<order_id> the states of the ids asked about
-- Returns {avail, flags}: avail is -1 when the stock is not loaded (the
-- caller must not answer sold out), flags a string with one character per
-- id of KEYS[2..n]: '1' when the id names an order that was reserved
-- (state A, P, Rn: on its way; C: committed; X: rejected in MySQL) and a
-- retry of it must get that order's own answer, '0' when it names none
-- (no state, or S sold out, L over the purchase limit, U undone: orders
-- that were answered not taken).
local avail = redis.call('GET', KEYS[1])
if not avail then return {-1, ''} end
if #KEYS == 1 then return {tonumber(avail), ''} end
local states = redis.call('MGET', unpack(KEYS, 2))
local flags = {}
for i = 1, #states do
  local c = states[i] and string.sub(states[i], 1, 1)
  if c and c ~= 'S' and c ~= 'L' and c ~= 'U' then
    flags[i] = '1'
  else
    flags[i] = '0'
  end
end
return {tonumber(avail), table.concat(flags)}
