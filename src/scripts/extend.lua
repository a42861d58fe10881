-- extend: re-arms the lock's ttl if the owner still holds it.
--
-- KEYS[1]  the lock key: a hash owner -> hold count
-- ARGV[1]  owner token
-- ARGV[2]  new ttl in milliseconds
--
-- Replies:
--   1  re-armed: the key now expires ARGV[2] ms from now
--   0  the owner does not hold it: nothing changed
if redis.call('type', KEYS[1])['ok'] == 'hash' and redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
return 0
