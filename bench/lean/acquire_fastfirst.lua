-- PROTOTYPE (issue 32, docs/protocol-lean.md, "Fast paths first"): today's acquire.lua
-- (src/scripts) on a lock set of one node, cut down to its write fast path written inline, so
-- that no function is made before it: the production script makes nine closures per call
-- (key_clock.lua's two, its own seven). Not used by the library; measured by
-- bench/lean_cost.py against today's script with the same keys and arguments.
--
-- KEYS and ARGV: acquire.lua's (KEYS[1] NAME, KEYS[2] the name's counter, KEYS[3] the node
-- counter dlock:fence-floor, KEYS[4] dlock:max-ttl, KEYS[5] readers, KEYS[6] waiting writers;
-- ARGV[1] owner, ARGV[2] hold id, ARGV[3] ttl, ARGV[4] 'w', ARGV[5], ARGV[6], ARGV[7] 'n').
-- Replies the token, as acquire.lua does; an error for every case it does not cover (a
-- production version would go on with today's script there).
if ARGV[4] ~= 'w' or KEYS[7] or ARGV[7] ~= 'n' or ARGV[6] == '1' or
    redis.call('exists', KEYS[1], KEYS[5]) ~= 0 then
  return redis.error_reply('PROTOTYPE not the write fast path')
end
redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
redis.call('pexpire', KEYS[1], ARGV[3])
local counted = redis.pcall('incr', KEYS[3])
if type(counted) ~= 'number' then return redis.error_reply('PROTOTYPE no integer floor') end
local token = counted
if token <= 1 then  -- no floor: count from the clock, as acquire.lua does
  local t = redis.call('time')
  token = tonumber(t[1]) * 1000000 + tonumber(t[2]) + 1
end
local named = tonumber(redis.call('getdel', KEYS[2]) or '0')
if token <= named then token = named + 1 end
if token ~= counted then redis.call('set', KEYS[3], token) end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
local score = redis.call('zscore', KEYS[4], ARGV[3])
if score and tonumber(score) >= now + ttl then return token end
redis.call('zadd', KEYS[4], 'gt', now + 2 * ttl, ARGV[3])
if redis.call('pttl', KEYS[4]) < 2 * ttl then redis.call('pexpire', KEYS[4], 2 * ttl) end
return token
