-- force_release: an operator clears a stuck lock on this node, whoever holds it.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fair queue: dlock:queue:{NAME} (its first waiter is told)
-- ARGV[1]  release channel (dlock:release:{NAME})
-- ARGV[2]  '1' to delete a key that is not a dlock lock (e.g. another library's), '0' to keep it
--
-- Replies 'deleted' (a dlock lock), 'deleted-foreign', 'kept-foreign' or 'free' (no key).
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
  return 'free'
end
if kind ~= 'hash' and ARGV[2] ~= '1' then
  return 'kept-foreign'
end
redis.call('del', KEYS[1])
redis.call('publish', ARGV[1], redis.call('zrange', KEYS[2], 0, 0)[1] or '')
if kind == 'hash' then
  return 'deleted'
end
return 'deleted-foreign'
