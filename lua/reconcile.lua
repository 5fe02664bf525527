#!lua flags=allow-oom
-- reconcile: align one SKU's stock keys with MySQL, atomically against
-- live traffic. Each change is conditional on what the caller read, so a
-- reservation, commit or stock load made meanwhile is never clobbered.
-- KEYS[1] {sku:X}:avail   KEYS[2] {sku:X}:resv   KEYS[3] {sku:X}:sold
-- KEYS[4] {sku:X}:stock
-- KEYS[4+i]     {sku:X}:ord:<id> of the i-th order to commit (i = 1..nc)
-- KEYS[4+nc+j]  {sku:X}:ord:<id> of the j-th reservation to release
-- ARGV[1] stock in MySQL            ARGV[2] sold in MySQL
-- ARGV[3] stock the caller read in Redis ('' when missing)
-- ARGV[4] sold the caller read in Redis ('' when missing)
-- ARGV[5] order state TTL (s)       ARGV[6] '1' for a dry run (no writes)
-- ARGV[7] nc                        ARGV[8] nr
-- ARGV[9..] nc pairs (order_id, qty) of orders MySQL invoiced: each one not
--           committed yet (state C) is committed from its reservation, or
--           from avail when it has none, and marked C;
--           then nr pairs (order_id, reservation value the caller read):
--           each released when its reservation is unchanged, marked X;
--           one counted against the purchase limit (":L<N>", lua/reserve.lua)
--           gives its units back to {sku:X}:cust:<customer>, the key named
--           by the reservation (built from KEYS[1]'s hash tag, same slot).
-- Then stock and sold are set to MySQL's when Redis still holds what the
-- caller read (else a load or a commit raced: they are kept, aligned = 0),
-- and avail = stock - sold - reserved, so avail + resv + sold == stock.
-- Returns {stock0, avail0, sold0, reserved0, stock1, avail1, sold1,
-- reserved1, aligned, {committed ids}, {released ids}}; the *0 values are
-- those found (false when missing), the *1 values those left (or, in a dry
-- run, that would be left). aligned is -1, the *1 values false and nothing
-- changed, when the SKU's stock key vanished since the caller read it.
local stock0 = redis.call('GET', KEYS[4])
local avail0 = redis.call('GET', KEYS[1])
local sold0 = redis.call('GET', KEYS[3])
local dry = ARGV[6] == '1'
local nc, nr = tonumber(ARGV[7]), tonumber(ARGV[8])

local function units(v) return tonumber(string.match(v, '^(%d+)')) end

local reserved0 = 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do reserved0 = reserved0 + units(v) end

if not stock0 and ARGV[3] ~= '' then
  return {stock0, avail0, sold0, reserved0, false, false, false, reserved0, -1, {}, {}}
end

local sold = tonumber(sold0 or '0')
local removed = 0
local committed, released = {}, {}
local a = 9
for i = 1, nc do
  local id, qty, key = ARGV[a], tonumber(ARGV[a + 1]), KEYS[4 + i]
  a = a + 2
  if redis.call('GET', key) ~= 'C' then
    local r = redis.call('HGET', KEYS[2], id)
    if r then
      removed = removed + units(r)
      if not dry then redis.call('HDEL', KEYS[2], id) end
    end
    sold = sold + qty
    if not dry then redis.call('SET', key, 'C', 'EX', ARGV[5]) end
    committed[#committed + 1] = id
  end
end
for j = 1, nr do
  local id, want, key = ARGV[a], ARGV[a + 1], KEYS[4 + nc + j]
  a = a + 2
  local r = redis.call('HGET', KEYS[2], id)
  if r == want and redis.call('GET', key) ~= 'C' then
    removed = removed + units(r)
    if not dry then
      redis.call('HDEL', KEYS[2], id)
      redis.call('SET', key, 'X', 'EX', ARGV[5])
      local cust = string.match(r, '^%d+:%d+:[^:]*:([^:]*):L%d*$')
      if cust then
        local ck = string.sub(KEYS[1], 1, -6) .. 'cust:' .. cust
        if redis.call('DECRBY', ck, units(r)) <= 0 then redis.call('DEL', ck) end
      end
    end
    released[#released + 1] = id
  end
end

local aligned = 1
local stock = tonumber(stock0 or '0')
if (stock0 or '') == ARGV[3] then stock = tonumber(ARGV[1]) else aligned = 0 end
if (sold0 or '') == ARGV[4] then sold = tonumber(ARGV[2]) else aligned = 0 end
local reserved1 = reserved0 - removed
local avail = stock - sold - reserved1

if not dry then
  local function set(key, old, v)
    if old ~= tostring(v) then redis.call('SET', key, v) end
  end
  set(KEYS[4], stock0, stock)
  set(KEYS[3], sold0, sold)
  set(KEYS[1], avail0, avail)
end
return {stock0, avail0, sold0, reserved0, stock, avail, sold, reserved1, aligned, committed, released}
