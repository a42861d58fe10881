-- renew: the watchdog's batch; re-arms the ttl of many locks in one call (one per node per tick).
--
-- KEYS[i]       the lock key of the i-th lock (a hash owner -> hold count)
-- ARGV[2i - 1]  the i-th lock's owner token
-- ARGV[2i]      the i-th lock's ttl in milliseconds
--
-- Replies an array with one integer per key, in order:
--   1  re-armed: the key now expires ARGV[2i] ms from now
--   0  the owner no longer holds it: nothing changed
local result = {}
for i = 1, #KEYS do
  local owner = ARGV[2 * i - 1]
  if redis.call('type', KEYS[i])['ok'] == 'hash' and redis.call('hexists', KEYS[i], owner) == 1 then
    redis.call('pexpire', KEYS[i], ARGV[2 * i])
    result[i] = 1
  else
    result[i] = 0
  end
end
return result
