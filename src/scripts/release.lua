-- release: gives back one hold of the lock; frees it when the owner's count reaches 0.
--
-- KEYS[1]  the lock key: a hash owner -> hold count
-- ARGV[1]  owner token
-- ARGV[2]  release channel (dlock:release:{NAME}); told the owner when the lock is freed
--
-- Replies:
--   1  freed: the count reached 0, the key was deleted and the release published
--   2  one hold given back; the owner still holds the lock (count > 0)
--   0  the owner does not hold it (expired, taken by another, or never ours): nothing changed
if redis.call('type', KEYS[1])['ok'] ~= 'hash' or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then
  return 2
end
redis.call('del', KEYS[1])
redis.call('publish', ARGV[2], ARGV[1])
return 1
