-- PROTOTYPE, for comparison only (docs/protocol-lean.md, "what the key format costs"): the
-- uncontended acquire if the lock key were a string "HOLD_ID OWNER" set with SET NX PX, as the
-- raw floor's. A protocol change for every script that reads NAME; not proposed for now.
--
-- KEYS[1] NAME, KEYS[2] readers, KEYS[3] node counter, KEYS[4] dlock:max-ttl,
-- KEYS[5] dlock:max-ttl-ok:<ttl>; ARGV[1] owner, ARGV[2] hold id, ARGV[3] ttl (ms)
-- Replies token (> 0) granted, or {0, counter, pttl} held / {-2} readers (as acquire_lean.lua).
if redis.call('exists', KEYS[2]) == 1 then return {-2} end
if not redis.call('set', KEYS[1], ARGV[2] .. ' ' .. ARGV[1], 'nx', 'px', ARGV[3]) then
  return {0, tonumber(redis.call('get', KEYS[3]) or '0'), redis.call('pttl', KEYS[1])}
end
local token = redis.call('incr', KEYS[3])
if token == 1 then
  local t = redis.call('time')
  token = tonumber(t[1]) * 1000000 + tonumber(t[2])
  redis.call('set', KEYS[3], token)
end
if redis.call('exists', KEYS[5]) == 0 then
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local ttl = tonumber(ARGV[3])
  redis.call('zadd', KEYS[4], 'gt', now + 2 * ttl, ttl)
  if redis.call('pttl', KEYS[4]) < 2 * ttl then redis.call('pexpire', KEYS[4], 2 * ttl) end
  redis.call('set', KEYS[5], '1', 'px', ttl)
end
return token
