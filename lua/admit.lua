#!lua
-- admit: one order request against its customer, on the customer's slot:
-- the customer's rate limit (gcra, lua/gcra.lua) and the order's
-- idempotency claim, so admitting an order costs one round trip.
-- KEYS[1]    {cust:TAG}:rl:<customer>   theoretical arrival time, microseconds
-- KEYS[2..5] {cust:TAG}:idem:<order_id> the records the key would have in the
--            idempotency windows W-2, W-1, W, W+1, W being the caller's
--            (order.IDFor, order.KeyWindow). This master's clock, shifted
--            by the key's phase, decides the current window: live records
--            are in it or the one before (or, made by a gateway from before
--            keys had phases, the one before that).
-- ARGV[1] emission interval: microseconds between requests at the
--         sustained rate (1e6 / rate per second)
-- ARGV[2] burst: requests that may arrive at once; 0 turns the limit off
-- ARGV[3] the request's fingerprint
-- ARGV[4] idempotency record TTL and window length, milliseconds
-- ARGV[5] nonce of this call
-- ARGV[6] W
-- ARGV[7] the key's phase, milliseconds (order.Phase)
-- A record is "<fingerprint>#<nonce of the call that made it>"; one made by
-- a gateway from before sold-out answers left no record may carry '!'
-- before the fingerprint (the reader ignores it).
-- Returns, with i the index (1-4) of the record's key among KEYS[2..5]:
--   {0, retry_after_us, i or 0, record or false}  over budget, nothing written
--   {1, i, false}   this call made the record (or go-redis is resending the
--                   call that made it: the budget is spent once)
--   {2, i, record}  a record exists (a retry, or another body): unchanged
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local d = math.floor((math.floor(now_us / 1000) + tonumber(ARGV[7])) / tonumber(ARGV[4])) - tonumber(ARGV[6])
if d < -1 or d > 1 then
  return redis.error_reply('ERR the gateway clock is an idempotency window or more off this master')
end
local cur = 4 + d
-- A live record made under windows without phases (a gateway from before
-- them) may be two windows back; none made since can be, so reading it is
-- always safe. KEYS[1] is the budget: with cur at 3 the read repeats cur - 1.
local back = math.max(cur - 2, 2)
local i, v
-- One read for the budget and the records (each call costs).
local found = redis.call('MGET', KEYS[1], KEYS[back], KEYS[cur - 1], KEYS[cur])
if found[2] then
  i, v = back, found[2]
elseif found[3] then
  i, v = cur - 1, found[3]
elseif found[4] then
  i, v = cur, found[4]
end
if v and string.match(v, '#([^#]*)$') == ARGV[5] then
  return {1, i - 1, false}
end
local burst = tonumber(ARGV[2])
if burst > 0 then
  local wait = gcra(KEYS[1], found[1], tonumber(ARGV[1]), burst, now_us)
  if wait > 0 then
    return {0, wait, i and i - 1 or 0, v or false}
  end
end
if v then
  return {2, i - 1, v}
end
redis.call('SET', KEYS[cur], ARGV[3] .. '#' .. ARGV[5], 'PX', ARGV[4])
return {1, cur - 1, false}
