#!lua
-- cache_swap: replace a cache entry's value when its version is still the
-- one the caller read (compare-and-swap), keeping its expiry.
-- KEYS[1] {cache:NS:ID}
-- ARGV[1] version read   ARGV[2] new version   ARGV[3] new value
-- Returns 1 when swapped, 0 when the entry is gone or was rewritten.
if redis.call('HGET', KEYS[1], 'ver') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'v', ARGV[3], 'ver', ARGV[2])
return 1
