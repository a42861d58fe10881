-- fenced_write: a resource's write that only a current lock holder can make. Accepts the write
-- if the token is not lower than the last token accepted for this key, and remembers it.
--
-- KEYS[1]  the data key
-- KEYS[2]  the last accepted token for it: dlock:accepted:{KEY}
-- ARGV[1]  the value to write
-- ARGV[2]  the writer's fencing token (a positive integer)
--
-- Replies {1, token} written, or {0, last} refused: a writer with a newer token came first.
local last = tonumber(redis.call('get', KEYS[2]) or '0')
local token = tonumber(ARGV[2])
if token < last then
  return {0, last}
end
redis.call('set', KEYS[1], ARGV[1])
redis.call('set', KEYS[2], ARGV[2])
return {1, token}
