#!lua flags=allow-oom
-- release: return an order's reserved units to avail.
-- KEYS[1] {sku:X}:avail   KEYS[2] {sku:X}:resv   KEYS[3] {sku:X}:ord:<order_id>
-- ARGV[1] order_id
-- ARGV[2] mode:
--   'undo'   the gateway's request that reserved learnt its publish
--            certainly failed: release only that request's own reservation
--            (state A, nonce ARGV[4]) and mark the order U (undone) for
--            ARGV[5] seconds, so that a retry that claimed meanwhile does
--            not take the order after it was answered not taken (see
--            lua/reserve.lua). A repeat marked the order P (it may have been
--            published by another request): then nothing changes.
--   'reject' the order ended rejected in MySQL: release whatever it holds
--            and keep its state (X) so a retry is answered as before.
-- ARGV[3] order state TTL (s)   ARGV[4] the reserving request's nonce (undo)
-- ARGV[5] how long U lasts (s, undo)
-- Returns the units released (0 when the order held none), -1 when the
-- order is committed (sold units are never released), -2 (undo only) when
-- the reservation is not the caller's to undo. Idempotent. Runs even when
-- memory is full: it frees more than it takes.
local state = redis.call('GET', KEYS[3])
if state == 'C' then return -1 end
local r = redis.call('HGET', KEYS[2], ARGV[1])
if ARGV[2] == 'undo' then
  if not r and (not state or state == 'S' or state == 'U') then return 0 end
  if state ~= 'A' or not r or string.match(r, '^%d+:%d+:([^:]*)') ~= ARGV[4] then return -2 end
end
local released = 0
if r then
  released = tonumber(string.match(r, '^(%d+)'))
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('INCRBY', KEYS[1], released)
end
if ARGV[2] == 'undo' then
  redis.call('SET', KEYS[3], 'U', 'EX', ARGV[5])
else
  redis.call('SET', KEYS[3], 'X', 'EX', ARGV[3])
end
return released
