-- acquire: takes the lock for an owner, or counts one more hold when the owner has it already.
--
-- KEYS[1]  the lock key (the name the user gave): a hash owner -> hold count, with a ttl
-- KEYS[2]  the fencing counter of this name: dlock:fence:{NAME}, an integer, never expires
-- ARGV[1]  owner token
-- ARGV[2]  ttl in milliseconds
--
-- Replies {status, fence, detail}:
--   {1, fence, 0}      acquired: the key was absent; fence is the counter after INCR
--   {2, fence, count}  reentered: the owner held it; count is the new hold count; the ttl is
--                      raised to ARGV[2] if it was lower (never shortened)
--   {0, fence, pttl}   held by someone else: another owner, or a key that is not a dlock hash
--                      (e.g. another library's SET NX PX string), which is never touched;
--                      fence is the counter as it is (not raised); pttl is the key's remaining
--                      ttl in ms (-1: none)
-- EXISTS first: the common case (a free lock) needs no TYPE, whose reply is a Lua table.
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hset', KEYS[1], ARGV[1], '1')  -- a string: Lua would format a number with sprintf
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, redis.call('incr', KEYS[2]), 0}
end
if redis.call('type', KEYS[1])['ok'] == 'hash' and redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  local count = redis.call('hincrby', KEYS[1], ARGV[1], 1)
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('pexpire', KEYS[1], ARGV[2])
  end
  return {2, tonumber(redis.call('get', KEYS[2]) or '0'), count}
end
return {0, tonumber(redis.call('get', KEYS[2]) or '0'), redis.call('pttl', KEYS[1])}
