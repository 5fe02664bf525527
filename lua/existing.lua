#!lua flags=no-writes
-- existing: read, without claiming anything, the idempotency record a key
-- has, deciding the current window by this master's clock as lua/admit.lua
-- does, so that a gateway whose clock is off finds the same record a claim
-- would. It writes nothing, so it also answers on a full node (maxmemory).
-- KEYS[1..4] {cust:TAG}:idem:<order_id> the records the key would have in
--            the idempotency windows W-2, W-1, W, W+1, W being the caller's
--            (order.IDFor, order.KeyWindow)
-- ARGV[1] window length (the records' TTL), milliseconds
-- ARGV[2] W
-- ARGV[3] the key's phase, milliseconds (order.Phase)
-- Returns, with cur this master's current window:
--   {i, record}   the record found (live records are in cur or cur-1, or
--                 cur-2 when made before keys had phases), i its index
--                 (1-4) among KEYS
--   {i, false}    no record; i is the index of cur: a claim now creates it
--   {0, cur}      cur is not among W-1..W+1: ask again with W = cur
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = math.floor((now_ms + tonumber(ARGV[3])) / tonumber(ARGV[1]))
local d = cur - tonumber(ARGV[2])
if d < -1 or d > 1 then
  return {0, cur}
end
local i = 3 + d
-- Two windows back: a live record made by a gateway from before keys had
-- phases (see lua/admit.lua); with i at 2 the read repeats i - 1.
local back = math.max(i - 2, 1)
local found = redis.call('MGET', KEYS[back], KEYS[i - 1], KEYS[i])
if found[1] then
  return {back, found[1]}
end
if found[2] then
  return {i - 1, found[2]}
end
return {i, found[3]}
