-- PROTOTYPE (issue 32, docs/protocol-lean.md, "Fast paths first"): today's release.lua
-- (src/scripts) cut down to the release of a write hold when nobody queues, without
-- key_clock.lua before it (whose two functions the production script makes on every call).
-- Not used by the library; measured by bench/lean_cost.py.
--
-- KEYS and ARGV: release.lua's (KEYS[1] NAME, KEYS[2] the fair queue, KEYS[3] its liveness,
-- KEYS[4] readers; ARGV[1] owner, ARGV[2] release channel, ARGV[3] hold id, ARGV[4] 'w',
-- ARGV[5] 'publish'). Replies as release.lua: n >= 0 freed, -1 not held; an error for every
-- case it does not cover (a read hold, a semaphore slot, a queue).
if ARGV[4] ~= 'w' or KEYS[5] then return redis.error_reply('PROTOTYPE not the fast path') end
local id = redis.pcall('hget', KEYS[1], ARGV[1])
if type(id) ~= 'string' or (ARGV[3] ~= '' and id ~= ARGV[3]) then return -1 end
redis.call('del', KEYS[1])
if redis.call('zrange', KEYS[2], 0, 0)[1] then
  return redis.error_reply('PROTOTYPE a queue')
end
return redis.call(ARGV[5], ARGV[2], '~' .. ARGV[1])
