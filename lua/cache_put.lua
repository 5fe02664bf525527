#!lua
-- cache_put: store a rebuilt entry and release the rebuild lease.
-- KEYS[1] {cache:NS:ID}   KEYS[2] {cache:NS:ID}:lease
-- ARGV[1] rebuilder token (also the entry's new version)
-- ARGV[2] value   ARGV[3] soft expiry (unix ms)   ARGV[4] load time (ms)
-- ARGV[5] '1' for a cached miss, else '0'
-- ARGV[6] hard TTL (ms): soft TTL plus the time a stale value may be served
-- Returns 1.
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'exp', ARGV[3], 'dl', ARGV[4], 'm', ARGV[5], 'ver', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
end
return 1
