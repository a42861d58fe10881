-- renew: re-arms the ttl of many holds in one call (the watchdog's batch, extend(), and a
-- reentrant acquisition, which must make the key outlive its own ttl too).
--
-- KEYS[i]       the lock key of the i-th hold (a hash owner -> hold id)
-- ARGV[3i - 2]  the i-th hold's owner token
-- ARGV[3i - 1]  the i-th hold's id
-- ARGV[3i]      the i-th ttl in milliseconds
--
-- A ttl is never shortened: reentrant leases of one hold share the key, and each was promised
-- that the key lives at least its own ttl from its last renewal.
--
-- Replies an array with one integer per key, in order:
--   1  the hold is here and the key now expires no sooner than ARGV[3i] ms from now
--   0  this hold is not here (expired, released, taken over): nothing changed
local result = {}
for i = 1, #KEYS do
  local id = redis.pcall('hget', KEYS[i], ARGV[3 * i - 2])
  if type(id) == 'string' and id == ARGV[3 * i - 1] then
    if redis.call('pttl', KEYS[i]) < tonumber(ARGV[3 * i]) then
      redis.call('pexpire', KEYS[i], ARGV[3 * i])
    end
    result[i] = 1
  else
    result[i] = 0
  end
end
return result
