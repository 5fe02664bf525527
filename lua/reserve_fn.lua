-- reserve_fn: one order's reservation, the body of lua/reserve.lua and of
-- lua/reserve_many.lua (package lua puts it where those scripts say
-- "--@reserve_fn"). Its arguments are reserve.lua's KEYS[1..6] and
-- ARGV[1..6], in that order; it returns that script's code and avail.
local function reserve(k_avail, k_resv, k_ord, k_undone, k_max, k_cust, id, qty_arg, nonce, customer, ttl, new_claim)
  local got = redis.call('MGET', k_ord, k_undone)
  local state, undone = got[1], got[2]
  if undone and string.find(' ' .. undone .. ' ', ' ' .. nonce .. ' ', 1, true) then
    return 5, 0
  end
  if state == 'U' and new_claim ~= '1' then return 4, 0 end
  if state and state ~= 'U' then
    if state == 'S' then return 3, 0 end
    if state == 'L' then return 7, 0 end
    local r = redis.call('HGET', k_resv, id)
    if r and string.match(r, '^%d+:%d+:([^:]*)') == nonce then
      return 1, tonumber(redis.call('GET', k_avail) or '0')
    end
    if state == 'A' then redis.call('SET', k_ord, 'P', 'KEEPTTL') end
    return 2, 0
  end
  local sku = redis.call('MGET', k_avail, k_max)
  if not sku[1] then return -1, 0 end
  local avail = tonumber(sku[1])
  local qty = tonumber(qty_arg)
  if avail < qty then
    redis.call('SET', k_ord, 'S', 'EX', ttl)
    return 0, avail
  end
  local counted = ''
  local limit = tonumber(sku[2] or '0')
  if limit > 0 then
    if tonumber(redis.call('GET', k_cust) or '0') + qty > limit then
      redis.call('SET', k_ord, 'L', 'EX', ttl)
      return 6, avail
    end
    redis.call('INCRBY', k_cust, qty)
    counted = ':L'
  end
  local t = redis.call('TIME')
  local ms = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  redis.call('DECRBY', k_avail, qty)
  redis.call('HSET', k_resv, id, qty_arg .. ':' .. ms .. ':' .. nonce .. ':' .. customer .. counted)
  redis.call('SET', k_ord, 'A', 'EX', ttl)
  return 1, avail - qty
end
