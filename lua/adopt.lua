#!lua flags=allow-oom
-- adopt: the reconciler takes over orders whose reservation waited past
-- the grace period with no order in MySQL. Such an order may be in the
-- queue, a retry tier or the dead letters, or never have been published
-- (a gateway died, or a confirm never came): the reconciler publishes it
-- again, and the worker, idempotent per order id, settles it once. The
-- reservation is never released as "never published".
-- KEYS[1] {sku:X}:resv    KEYS[1+i] {sku:X}:ord:<id of the i-th order>
-- ARGV[1] grace (ms)      ARGV[2] order state TTL (s)
-- ARGV[3..] pairs (order_id, reservation value the caller read)
-- An order published again n times (state Rn; A, P or none count as 0) is
-- adopted once its reservation, unchanged since the caller read it, is
-- older than grace * 2^n (n capped at 10): an order that keeps failing
-- (its dead letter keeps coming back) is tried less and less often, never
-- dropped. Adopting sets its state to R(n+1) and its reservation's time to
-- now. States C, X and S are never adopted.
-- Returns the adopted ids.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local grace = tonumber(ARGV[1])
local adopted = {}
for i = 1, #KEYS - 1 do
  local id, want = ARGV[1 + 2 * i], ARGV[2 + 2 * i]
  if redis.call('HGET', KEYS[1], id) == want then
    local st = redis.call('GET', KEYS[1 + i])
    local n
    if not st or st == 'A' or st == 'P' then
      n = 0
    elseif string.sub(st, 1, 1) == 'R' then
      n = tonumber(string.sub(st, 2)) or 0
    end
    local qty, at, rest = string.match(want, '^(%d+):(%d+)(.*)$')
    if n and now - tonumber(at) > grace * 2 ^ math.min(n, 10) then
      redis.call('SET', KEYS[1 + i], 'R' .. (n + 1), 'EX', ARGV[2])
      redis.call('HSET', KEYS[1], id, qty .. ':' .. string.format('%d', now) .. rest)
      adopted[#adopted + 1] = id
    end
  end
end
return adopted
