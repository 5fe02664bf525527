#!lua flags=allow-oom
-- lease_release: delete a lease only while the caller still holds it.
-- KEYS[1] the lease key (a lock, or a cache rebuild lease)
-- ARGV[1] the holder's token
-- Returns 1 when released, 0 when the lease is gone or held by another.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
