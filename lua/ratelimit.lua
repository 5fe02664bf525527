#!lua
-- ratelimit: one request against a subject's budget (gcra, lua/gcra.lua).
-- KEYS[1] {rl:<subject>}
-- ARGV[1] emission interval: microseconds between requests at the
--         sustained rate (1e6 / rate per second)
-- ARGV[2] burst: how many requests may arrive at once (>= 1)
-- Returns {allowed (1|0), retry_after_us}: retry_after_us is 0 when allowed,
-- else the wait until one request fits again. A refused request changes
-- nothing.
local t = redis.call('TIME')
local wait = gcra(KEYS[1], redis.call('GET', KEYS[1]), tonumber(ARGV[1]), tonumber(ARGV[2]),
  tonumber(t[1]) * 1000000 + tonumber(t[2]))
if wait > 0 then
  return {0, wait}
end
return {1, 0}
