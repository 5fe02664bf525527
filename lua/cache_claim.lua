#!lua
-- cache_claim: read a cache entry and, when it is still the version the
-- caller saw (missing, or stale), take its rebuild lease. Reading and
-- claiming in one step means a caller that saw an old version can never
-- start a second rebuild after another one has written the new version.
-- KEYS[1] {cache:NS:ID}         entry hash: v, exp, dl, m, ver
-- KEYS[2] {cache:NS:ID}:lease   rebuild lease
-- ARGV[1] rebuilder token   ARGV[2] lease TTL (ms)
-- ARGV[3] version the caller saw ('' for a missing entry)
-- Returns {leased (1|0), v, exp, dl, m, ver} with the entry's current
-- fields (nil when missing).
local cur = redis.call('HMGET', KEYS[1], 'v', 'exp', 'dl', 'm', 'ver')
local leased = 0
if (cur[5] or '') == ARGV[3] and redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  leased = 1
end
return {leased, cur[1], cur[2], cur[3], cur[4], cur[5]}
