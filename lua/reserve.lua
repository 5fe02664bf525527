#!lua
-- reserve: move qty units of one SKU from avail to an open reservation.
-- KEYS[1] {sku:X}:avail   KEYS[2] {sku:X}:resv   KEYS[3] {sku:X}:ord:<order_id>
-- KEYS[4] {sku:X}:undone:<order_id> the nonces of this order's undone
--         calls (lua/release.lua mode 'undo'), space-separated
-- KEYS[5] {sku:X}:max the SKU's purchase limit per customer (missing or 0:
--         none)
-- KEYS[6] {sku:X}:cust:<customer_id> the units the customer holds reserved
--         or committed, kept only while a limit is set
-- ARGV[1] order_id        ARGV[2] qty
-- ARGV[3] nonce of the call reserving (lets it undo only its own work)
-- ARGV[4] customer_id     ARGV[5] order state TTL in seconds
-- ARGV[6] '1' when the request's idempotency claim made a new record, '0'
--         for a retry of a record that existed
-- Returns {code, avail, limit}:
--   1 reserved now, or this very call seen again (go-redis resent it after
--     a lost reply) while its reservation stands: the state is unchanged;
--   2 repeat of an accepted order by another call (nothing reserved);
--   0 sold out (the call's nonce remembered for the order: state
--     'S <nonce> ...'); 3 this very call answered sold out before (a copy
--     of it, go-redis resending it or TCP retransmitting it), or an order
--     refused sold out before calls were remembered (state 'S' alone);
--   4 a retry of an order its first request undid as not taken (state
--     U): nothing reserved, the retry is not taken either;
--   5 this call was undone already (its nonce is in KEYS[4]): a copy that
--     reached Redis after the gateway undid it and answered not taken
--     (TCP retransmitted it, or go-redis resent it). Nothing reserved,
--     nothing changed;
--   6 purchase limit: the customer's units plus qty would pass the limit
--     (remembered for the order, state L; avail is returned: the SKU is
--     not sold out); 7 repeat of an order refused so;
--  -1 stock not loaded (the caller must not sell).
-- limit, with codes 1 and 2, is the purchase limit the order was reserved
-- under (0: none), as its reservation records it; -1 when no reservation
-- says (a repeat of an order settled since, or reserved before
-- reservations recorded their limit). The order carries it to MySQL,
-- which judges the order by it: a limit changed after the order was
-- accepted does not change the order's fate. 0 with the other codes.
-- Sold out is checked first: a refusal for the limit means units are left.
-- An order refused sold out binds nothing: another call for it (a retry,
-- whose nonce is new) is judged anew, and when it reserves, the nonces of
-- the calls refused before move to KEYS[4], so a late copy of one of them
-- reserves nothing (code 5) and cannot take the order behind the retry's
-- back.
-- The reservation is "qty:reserved_ms:nonce:customer_id", with ":L<N>"
-- after it when it was counted in KEYS[6] against a limit of N
-- (lua/release.lua gives only such units back; one written before the
-- limit was recorded ends in ":L" alone); the time is by this master's
-- clock (the reconciler's grace is measured on it, not on a gateway's).
-- A repeat by another call turns state A into P: another
-- request for the same order may publish it from now on, so the first
-- request can no longer undo the reservation as "never published"
-- (lua/release.lua). State U blocks only retries that claimed before the
-- undoing request forgot its record; a request that claims anew
-- afterwards reserves as usual, with a fresh nonce.
-- Idempotent per order id: go-redis retries timed-out scripts, and clients
-- retry requests. The shebang makes Redis refuse the whole script when
-- memory is full (maxmemory), never half of it.
-- the limit a reservation value records: N for ":L<N>", 0 for none, -1
-- for ":L" alone or no reservation (see above)
local function limitOf(r)
  if not r then return -1 end
  local l = string.match(r, '^%d+:%d+:[^:]*:[^:]*:L(%d*)$')
  if not l then return 0 end
  return tonumber(l) or -1
end
local got = redis.call('MGET', KEYS[3], KEYS[4])
local state, undone = got[1], got[2]
if undone and string.find(' ' .. undone .. ' ', ' ' .. ARGV[3] .. ' ', 1, true) then
  return {5, 0, 0}
end
if state == 'U' and ARGV[6] ~= '1' then return {4, 0, 0} end
local refused -- the nonces of the calls answered sold out before
if state and string.sub(state, 1, 1) == 'S' then
  if state == 'S' or string.find(state .. ' ', ' ' .. ARGV[3] .. ' ', 1, true) then return {3, 0, 0} end
  refused, state = string.sub(state, 3), nil
end
if state and state ~= 'U' then
  if state == 'L' then return {7, 0, 0} end
  local r = redis.call('HGET', KEYS[2], ARGV[1])
  if r and string.match(r, '^%d+:%d+:([^:]*)') == ARGV[3] then
    return {1, tonumber(redis.call('GET', KEYS[1]) or '0'), limitOf(r)}
  end
  if state == 'A' then redis.call('SET', KEYS[3], 'P', 'KEEPTTL') end
  return {2, 0, limitOf(r)}
end
local sku = redis.call('MGET', KEYS[1], KEYS[5])
if not sku[1] then return {-1, 0, 0} end
local avail = tonumber(sku[1])
local qty = tonumber(ARGV[2])
if avail < qty then
  redis.call('SET', KEYS[3], 'S ' .. (refused and refused .. ' ' or '') .. ARGV[3], 'EX', ARGV[5])
  return {0, avail, 0}
end
local counted = ''
local limit = tonumber(sku[2] or '0')
if limit > 0 then
  if tonumber(redis.call('GET', KEYS[6]) or '0') + qty > limit then
    redis.call('SET', KEYS[3], 'L', 'EX', ARGV[5])
    return {6, avail, 0}
  end
  redis.call('INCRBY', KEYS[6], qty)
  counted = ':L' .. limit
end
if refused then
  redis.call('SET', KEYS[4], (undone and undone .. ' ' or '') .. refused, 'EX', ARGV[5])
end
local t = redis.call('TIME')
local ms = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
redis.call('DECRBY', KEYS[1], qty)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. ':' .. ms .. ':' .. ARGV[3] .. ':' .. ARGV[4] .. counted)
redis.call('SET', KEYS[3], 'A', 'EX', ARGV[5])
return {1, avail - qty, limit}
