-- fenced_read: a holder's read of the resource; registers its token first, so that from now on
-- no older holder's write is accepted. (Without it, a paused holder's late write could still
-- land between a newer holder's acquisition and that holder's first write.)
--
-- KEYS[1]  the data key
-- KEYS[2]  the last accepted token for it: dlock:accepted:{KEY}
-- ARGV[1]  the reader's fencing token (a positive integer)
--
-- Replies {1, value or false} read (the token is now the last accepted), or {0, last} refused:
-- a holder with a newer token came first.
local last = tonumber(redis.call('get', KEYS[2]) or '0')
local token = tonumber(ARGV[1])
if token < last then
  return {0, last}
end
redis.call('set', KEYS[2], ARGV[1])
return {1, redis.call('get', KEYS[1])}
