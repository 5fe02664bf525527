#!lua flags=allow-oom
-- lock_acquire: take a lock lease and issue its fencing token.
-- KEYS[1] {lock:NAME}        the lease, holding the holder's random token
-- KEYS[2] {lock:NAME}:fence  the last fencing token issued for NAME
-- ARGV[1] holder token   ARGV[2] lease TTL (ms)   ARGV[3] fence counter TTL (ms)
-- Returns the fencing token (> 0) when the lease was taken, 0 when another
-- holder has it. When the lease already holds this holder's token, this is
-- the same call again (go-redis resends a script whose reply timed out):
-- the token it issued is returned, not 0, so the caller does not wait out
-- a lease it holds.
--
-- The token is max(last + 1, now in microseconds by this master's clock).
-- The counter alone is not enough: replication is asynchronous, so a
-- failover can promote a replica whose counter is behind tokens already
-- handed out, and an INCR there would issue them again. The clock term
-- keeps tokens growing across that: a promotion takes at least
-- cluster-node-timeout (seconds), far more than the skew between the
-- masters' clocks, so the new master's "now" is above every token the old
-- one issued. The counter term keeps tokens strictly increasing on one
-- master when acquisitions share a microsecond or its clock steps back.
-- Assumptions: clocks move forward (NTP slews rather than steps), and the
-- skew between nodes stays far below the failover time. Because the clock
-- term dominates, the counter may expire: it only has to outlive a clock
-- step, which bounds its memory on keys locked once (per-order locks).
-- Numbers stay below 2^53, exact in Lua's doubles; string.format('%d')
-- avoids Lua's 14-digit %g when storing them.
-- Runs even when memory is full (maxmemory): the worker takes this lock to
-- settle an accepted order, which writes a few bytes and frees the
-- reservation; refusing it would stop invoicing until memory falls.
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
  end
  local issued = redis.call('GET', KEYS[2])
  if issued then
    return tonumber(issued)
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local fence = math.max(last + 1, now)
redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', ARGV[3])
return fence
