#!lua flags=allow-oom
-- release: return an order's reserved units to avail.
-- KEYS[1] {sku:X}:avail   KEYS[2] {sku:X}:resv   KEYS[3] {sku:X}:ord:<order_id>
-- KEYS[4] {sku:X}:undone:<order_id> the nonces of the order's undone
--         reserve calls, space-separated (undo; lua/reserve.lua reads it)
-- ARGV[1] order_id
-- ARGV[2] mode:
--   'undo'   the gateway's request that reserved learnt its publish
--            certainly failed, or its reserve call failed (it may have run,
--            or may still run: a copy in TCP's retransmission queue, or
--            resent by go-redis): release only that call's own reservation
--            (state A, nonce ARGV[4]) and mark the order U (undone) for
--            ARGV[5] seconds, so that a retry that claimed meanwhile does
--            not take the order after it was answered not taken (see
--            lua/reserve.lua). A repeat by another call marked the order P
--            (it may have been published by another request): then nothing
--            is released. Whatever it finds, the undo adds ARGV[4] to
--            KEYS[4] for the order state's TTL (ARGV[3]), and the reserve
--            script refuses any later call carrying that nonce: a copy of
--            the undone call arriving after this script never reserves.
--   'reject' the order ended rejected in MySQL: release whatever it holds
--            and keep its state (X) so a retry is answered as before.
-- ARGV[3] order state TTL (s)   ARGV[4] the reserving call's nonce (undo)
-- ARGV[5] how long U lasts (s, undo)
-- A reservation counted against the SKU's purchase limit (":L<N>" after the
-- customer, lua/reserve.lua) gives its units back to the customer's count,
-- {sku:X}:cust:<customer>: that key is named by the reservation itself,
-- so the script builds it from KEYS[1]'s hash tag (same slot) rather
-- than take it from the caller, who does not know the customer; a count
-- reaching 0 is deleted.
-- Returns the units released (0 when the order held none), -1 when the
-- order is committed (sold units are never released), -2 (undo only) when
-- the reservation is not the caller's to undo. Idempotent. Runs even when
-- memory is full: it frees more than it takes, and an undo must leave its
-- mark.
local state = redis.call('GET', KEYS[3])
if ARGV[2] == 'undo' then
  local undone = redis.call('GET', KEYS[4])
  if not undone then
    undone = ARGV[4]
  elseif not string.find(' ' .. undone .. ' ', ' ' .. ARGV[4] .. ' ', 1, true) then
    undone = undone .. ' ' .. ARGV[4]
  end
  redis.call('SET', KEYS[4], undone, 'EX', ARGV[3])
end
if state == 'C' then return -1 end
local r = redis.call('HGET', KEYS[2], ARGV[1])
if ARGV[2] == 'undo' then
  local refusal = state and (string.sub(state, 1, 1) == 'S' or state == 'L')
  if not r and (not state or refusal or state == 'U') then
    -- The call reserved nothing yet. A sold-out order stays S (a retry
    -- is judged anew), one refused for the purchase limit L (a retry
    -- gets the same answer); any other is closed to the retries that
    -- claimed before the answer, as after a release.
    if not refusal then redis.call('SET', KEYS[3], 'U', 'EX', ARGV[5]) end
    return 0
  end
  if state ~= 'A' or not r or string.match(r, '^%d+:%d+:([^:]*)') ~= ARGV[4] then return -2 end
end
local released = 0
if r then
  released = tonumber(string.match(r, '^(%d+)'))
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('INCRBY', KEYS[1], released)
  local cust = string.match(r, '^%d+:%d+:[^:]*:([^:]*):L%d*$')
  if cust then
    local key = string.sub(KEYS[1], 1, -6) .. 'cust:' .. cust
    if redis.call('DECRBY', key, released) <= 0 then redis.call('DEL', key) end
  end
end
if ARGV[2] == 'undo' then
  redis.call('SET', KEYS[3], 'U', 'EX', ARGV[5])
else
  redis.call('SET', KEYS[3], 'X', 'EX', ARGV[3])
end
return released
