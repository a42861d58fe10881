-- fence_raise: second phase of a fencing token on N nodes; raises the counter to the token
-- handed out, so that a majority holds it and every later acquisition sees it.
--
-- KEYS[1]  the fencing counter of the name: dlock:fence:{NAME}
-- ARGV[1]  the token (a positive integer)
--
-- Replies the counter after the call (never lower than ARGV[1]).
local current = tonumber(redis.call('get', KEYS[1]) or '0')
local token = tonumber(ARGV[1])
if current < token then
  redis.call('set', KEYS[1], ARGV[1])
  return token
end
return current
