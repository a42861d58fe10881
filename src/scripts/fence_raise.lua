-- fence_raise: second phase of a fencing token on N nodes; raises the name's counter to the
-- token handed out, so that a majority holds it and every later acquisition sees it.
--
-- KEYS[1]  the fencing counter of the name: dlock:fence:{NAME} (expires, see acquire.lua)
-- KEYS[2]  this node's fence floor: dlock:fence-floor
-- ARGV[1]  the token (a positive integer)
-- ARGV[2]  the lock's ttl in milliseconds: how long the counter is kept at least
--
-- Replies the counter after the call (never lower than ARGV[1]).
local current = tonumber(redis.call('get', KEYS[1]) or redis.call('get', KEYS[2]) or '0')
local token = tonumber(ARGV[1])
if current >= token then
  return current
end
redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
if token > tonumber(redis.call('get', KEYS[2]) or '0') then redis.call('set', KEYS[2], ARGV[1]) end
return token
