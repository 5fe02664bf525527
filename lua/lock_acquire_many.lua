#!lua flags=allow-oom
-- lock_acquire_many: take several lock leases that share a hash tag, and
-- issue their fencing tokens, in one call (pkg/lock's Group).
-- KEYS[1]     {TAG}:lockfence  the last fencing token issued for any lock of TAG
-- KEYS[2..n]  {TAG}:lock:NAME  the leases, each holding its holder's random token
-- ARGV[1] lease TTL (ms)   ARGV[2] fence counter TTL (ms)
-- ARGV[3..n+1] the holder tokens, one per lease key, in KEYS order
-- Returns one integer per lease key: its fencing token (> 0) when the lease
-- was taken, 0 when another holder has it. A lease that already holds its
-- caller's token is this same call sent again (go-redis resends a script
-- whose reply timed out): its TTL is renewed and it gets a new token, as
-- the token issued the first time never reached its caller.
--
-- The tokens are lua/lock_acquire.lua's, max(last + 1, now in microseconds
-- by this master's clock), from one counter per tag instead of one per
-- name: every token of a tag is above every token issued before for the
-- tag, so above every token issued before for each of its names, as long
-- as a name is always locked under the same tag. The clock term keeps that
-- across a failover that lost the counter (the argument and its clock
-- assumption are lua/lock_acquire.lua's). One counter per tag also means
-- one key per tag, where a counter per name left a key per order lock.
-- Runs even when memory is full, as lock_acquire does.
local t = redis.call('TIME')
local fence = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'),
  tonumber(t[1]) * 1000000 + tonumber(t[2]) - 1)
local issued = false
local out = {}
for i = 2, #KEYS do
  local token = ARGV[i + 1]
  local taken = redis.call('SET', KEYS[i], token, 'NX', 'PX', ARGV[1])
  if not taken and redis.call('GET', KEYS[i]) == token then
    taken = redis.call('SET', KEYS[i], token, 'PX', ARGV[1])
  end
  if taken then
    fence = fence + 1
    issued = true
    out[i - 1] = fence
  else
    out[i - 1] = 0
  end
end
if issued then
  redis.call('SET', KEYS[1], string.format('%d', fence), 'PX', ARGV[2])
end
return out
