#!lua flags=allow-oom
-- lease_extend: reset a lease's TTL only while the caller still holds it.
-- KEYS[1] the lease key
-- ARGV[1] the holder's token   ARGV[2] new TTL (ms)
-- Returns 1 when extended, 0 when the lease is gone or held by another.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
