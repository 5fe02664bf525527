#!lua flags=allow-oom
-- counts: the reconciler aligns a SKU's purchase limit, and the
-- per-customer counts of a SKU with a limit ({sku:X}:cust:<customer>,
-- lua/reserve.lua), with MySQL and the open reservations, after a failover
-- lost a load, increments or releases.
-- KEYS[1] {sku:X}:resv    KEYS[2] {sku:X}:max    KEYS[3] {sku:X}:sold
-- KEYS[3+i]      {sku:X}:cust:<customer i>, i = 1..n
-- KEYS[3+n+j]    {sku:X}:ord:<id of the j-th reservation the caller read>
-- ARGV[1] n      ARGV[2] m (reservations the caller read)
-- ARGV[3] '1' for a dry run (no writes)
-- ARGV[4] the limit in MySQL    ARGV[5] the limit the caller read in Redis
--         ('' when missing): the limit is set to MySQL's only when Redis
--         still holds what the caller read (a load racing is kept)
-- ARGV[6] sold as the caller knows it since its read ('' when missing):
--         when sold moved (a commit ran since), the counts are left as
--         they are (aligned 0): an order the caller's MySQL read missed
--         may have been committed meanwhile, and counted nowhere
-- ARGV[7..6+2n]  pairs (customer i, units MySQL invoiced to it)
-- then m triples (order id, customer, qty) of the counted reservations
--   (":L<N>") the caller read before it read MySQL, with, after them, the
--   ids among them that MySQL had invoiced: ARGV[7+2n+3m] = k, then k ids.
-- A customer's count is set to what MySQL invoiced to it, plus the counted
-- reservations open now whose order MySQL had not invoiced, plus those the
-- caller read that were committed since (state C, gone from resv: MySQL
-- invoiced them after the caller's read). Released reservations count no
-- more. Only the customers listed are touched; a count of 0 is deleted.
-- No count is touched when the SKU has no limit (after the alignment).
-- Returns {limit found ('' when missing), limit left, {customer, old (''
-- when missing), new, ...}, aligned (1, or 0 when sold moved)}.
local n, m, dry = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] == '1'
local found = redis.call('GET', KEYS[2]) or ''
local limit = tonumber(found ~= '' and found or '0')
if found == ARGV[5] and limit ~= tonumber(ARGV[4]) then
  limit = tonumber(ARGV[4])
  if not dry then
    if limit > 0 then redis.call('SET', KEYS[2], limit) else redis.call('DEL', KEYS[2]) end
  end
end
if limit <= 0 then return {found, '0', {}, 1} end
if (redis.call('GET', KEYS[3]) or '') ~= ARGV[6] then return {found, tostring(limit), {}, 0} end
local want, key = {}, {}
for i = 1, n do
  local c = ARGV[5 + 2 * i]
  want[c] = tonumber(ARGV[6 + 2 * i])
  key[c] = KEYS[3 + i]
end
local a = 7 + 2 * n + 3 * m
local invoiced = {}
for i = 1, tonumber(ARGV[a]) do invoiced[ARGV[a + i]] = true end
local open = redis.call('HGETALL', KEYS[1])
local held = {}
for i = 1, #open, 2 do
  local id, v = open[i], open[i + 1]
  held[id] = true
  local qty, c = string.match(v, '^(%d+):%d+:[^:]*:([^:]*):L%d*$')
  if c and want[c] and not invoiced[id] then want[c] = want[c] + tonumber(qty) end
end
for j = 1, m do
  local b = 4 + 2 * n + 3 * j
  local id, c, qty = ARGV[b], ARGV[b + 1], tonumber(ARGV[b + 2])
  if want[c] and not invoiced[id] and not held[id] and redis.call('GET', KEYS[3 + n + j]) == 'C' then
    want[c] = want[c] + qty
  end
end
local changes = {}
for i = 1, n do
  local c = ARGV[5 + 2 * i]
  local old = redis.call('GET', key[c])
  if tonumber(old or '0') ~= want[c] then
    changes[#changes + 1] = c
    changes[#changes + 1] = old or ''
    changes[#changes + 1] = tostring(want[c])
    if not dry then
      if want[c] > 0 then redis.call('SET', key[c], want[c]) else redis.call('DEL', key[c]) end
    end
  end
end
return {found, tostring(limit), changes, 1}
