-- PROTOTYPE (issue 32, docs/protocol-lean.md): group commit, the exclusive acquisitions of K
-- names in one call, each with its own outcome. One INCR of the node counter for the whole call:
-- every name granted here shares its value (tokens must grow per name, not be unique across
-- names). Not used by the library; measured by bench/lean_cost.py.
--
-- KEYS[1]  the node's fencing counter dlock:fence-floor (acquire_lean.lua KEYS[4]; a string
--          with ARGV[2] = '1', plan A; a hash field 'n' otherwise, plan B)
-- KEYS[2]  dlock:max-ttl; KEYS[3] dlock:max-ttl-ok:<ARGV[1]> (acquire_lean.lua KEYS[5], [6])
-- KEYS[3i + 1], KEYS[3i + 2], KEYS[3i + 3]  for the i-th name (i = 1..K): NAME, its readers
--          key, its old per-name counter (deleted on a grant with ARGV[2] = '1': plan A)
-- ARGV[1]  the largest ttl of the batch (ms): the one recorded in dlock:max-ttl
-- ARGV[2]  '1' plan A (delete the old per-name counters), '' plan B
-- ARGV[3i], ARGV[3i + 1], ARGV[3i + 2]  the i-th owner, hold id, ttl (ms)
--
-- Replies {counter, o_1, ..., o_K}: counter is the node counter after the call (after its INCR
-- if any name was granted: every granted name's token); o_i = 1 granted; o_i <= -1 held, the
-- key's pttl being -o_i - 2 (so -1: no ttl); o_i = 0 not handled by the fast path (readers, a
-- stale hold to take over, ...): the client sends that name alone to acquire_lean.lua / the
-- full script.
local out = {0}
local granted = false
for i = 1, (#KEYS - 3) / 3 do
  local key, readers = KEYS[3 * i + 1], KEYS[3 * i + 2]
  if redis.call('exists', key, readers) == 0 then
    redis.call('hset', key, ARGV[3 * i], ARGV[3 * i + 1])
    redis.call('pexpire', key, ARGV[3 * i + 2])
    if ARGV[2] == '1' then redis.call('del', KEYS[3 * i + 3]) end
    out[i + 1] = 1
    granted = true
  elseif redis.call('exists', readers) == 1 then
    out[i + 1] = 0
  else
    local mine = redis.pcall('hget', key, ARGV[3 * i])
    if type(mine) == 'string' and string.match(mine, '^(.*)%.%d+$') ==
        string.match(ARGV[3 * i + 1], '^(.*)%.%d+$') then
      out[i + 1] = 0  -- a hold of this client: the single-name script decides
    else
      out[i + 1] = -redis.call('pttl', key) - 2
    end
  end
end
if not granted then
  local counter
  if ARGV[2] == '1' then counter = redis.call('get', KEYS[1]) else counter = redis.call('hget', KEYS[1], 'n') end
  out[1] = tonumber(counter or '0')
  return out
end
local token
if ARGV[2] == '1' then token = redis.call('incr', KEYS[1]) else token = redis.call('hincrby', KEYS[1], 'n', 1) end
if token == 1 then
  local t = redis.call('time')
  token = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if ARGV[2] == '1' then redis.call('set', KEYS[1], token) else redis.call('hset', KEYS[1], 'n', token) end
end
out[1] = token
if redis.call('exists', KEYS[3]) == 0 then
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local ttl = tonumber(ARGV[1])
  local added = redis.pcall('zadd', KEYS[2], 'gt', now + 2 * ttl, ttl)
  if type(added) ~= 'number' then return added end
  if redis.call('pttl', KEYS[2]) < 2 * ttl then redis.call('pexpire', KEYS[2], 2 * ttl) end
  redis.call('set', KEYS[3], '1', 'px', ttl)
end
return out
