#!lua flags=allow-oom
-- record: change an idempotency record only when the caller made it.
-- KEYS[1] {cust:TAG}:idem:<order_id>
-- ARGV[1] the caller's nonce (lua/admit.lua)
-- ARGV[2] 'forget': delete the record (the caller's order was certainly
--         not taken, so the key is free again)
-- Returns 1 when done, 0 when the record is gone or another call
-- made it: nothing changed.
local v = redis.call('GET', KEYS[1])
if not v or string.match(v, '#([^#]*)$') ~= ARGV[1] then
  return 0
end
if ARGV[2] ~= 'forget' then
  return redis.error_reply('ERR unknown record operation ' .. tostring(ARGV[2]))
end
redis.call('DEL', KEYS[1])
return 1
