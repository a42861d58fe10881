-- force_release: an operator clears a stuck lock on this node, whoever holds it: the writer,
-- every reader, and the writers registered as waiting for readers.
--
-- KEYS[1]  the lock key: a dlock hold is the string "dlock" F " " HOLD_ID " " OWNER
--          (acquire.lua) or an older dlock's hash; any other key is foreign
-- KEYS[2]  the fair queue: dlock:queue:{NAME} (its first waiter is told)
-- KEYS[3]  the read holds: dlock:readers:{NAME}
-- KEYS[4]  writers waiting for readers: dlock:writers-waiting:{NAME}
-- ARGV[1]  release channel (dlock:release:{NAME})
-- ARGV[2]  '1' to delete a key that is not a dlock lock (e.g. another library's), '0' to keep it
-- ARGV[3]  'publish', or 'spublish' on a Redis Cluster (waiters listen on shard channels)
--
-- Replies 'deleted' (a dlock lock: a writer or readers), 'deleted-foreign', 'kept-foreign' or
-- 'free' (nothing held). Readers are deleted also when a foreign key is kept.
local kind = redis.call('type', KEYS[1])['ok']
local readers = redis.call('del', KEYS[3], KEYS[4]) > 0
if kind == 'none' and not readers then
  return 'free'
end
local foreign = kind ~= 'none' and kind ~= 'hash' and
    not (kind == 'string' and string.find(redis.call('get', KEYS[1]), '^dlock[.!] %S+ .'))
if foreign and ARGV[2] ~= '1' then
  if readers then redis.pcall(ARGV[3], ARGV[1], redis.call('zrange', KEYS[2], 0, 0)[1] or '') end
  return 'kept-foreign'
end
if kind ~= 'none' then redis.call('del', KEYS[1]) end
redis.pcall(ARGV[3], ARGV[1], redis.call('zrange', KEYS[2], 0, 0)[1] or '')
if foreign then
  return 'deleted-foreign'
end
return 'deleted'
