#!lua flags=allow-oom
-- lease_release_many: delete several leases of one hash tag, each only
-- while its caller still holds it (pkg/lock's Group).
-- KEYS[1..n] the lease keys   ARGV[1..n] their holders' tokens, in KEYS order
-- Returns one integer per lease: 1 when released, 0 when it was gone or
-- held by another.
local out = {}
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[i] then
    out[i] = redis.call('DEL', KEYS[i])
  else
    out[i] = 0
  end
end
return out
