-- acquire_batch: group commit (docs/protocol.md, "Group commit"): K write acquisitions on one
-- node in one call, each with an outcome of its own. Per name it runs only acquire.lua's fast
-- path with the node's counter (ARGV[7] = 'n': a free name, no readers), or nothing at all; the
-- per-node work (one INCR of the floor, the max-ttl record) is done once per call.
--
-- KEYS[1]  dlock:fence-floor (acquire.lua KEYS[3]): the node's counter
-- KEYS[2]  dlock:max-ttl (acquire.lua KEYS[4]): the ttls of leases that may still live here
-- KEYS[3i], KEYS[3i + 1], KEYS[3i + 2]  for the i-th name (i = 1..K): the lock key NAME, its
--          counter dlock:fence:{NAME} and its readers dlock:readers:{NAME} (acquire.lua KEYS[1],
--          KEYS[2], KEYS[5])
-- ARGV[3i - 2], ARGV[3i - 1], ARGV[3i]  the i-th owner token, hold id and ttl in ms
--          (acquire.lua ARGV[1..3])
--
-- Replies an array of K elements, the i-th for the i-th name:
--   fence  granted, exactly as acquire.lua grants a free name: every name granted in this call
--          gets the same fence, one INCR of the floor (tokens must grow per name, not differ
--          across names)
--   nil    nothing was changed for this name (its key or its readers exist): the client sends
--          it alone to acquire.lua, whose other paths (held, a stale hold taken over, readers)
--          then apply. Never a refusal. The same name twice in one call: the first may be
--          granted, the second meets its key and is nil (a takeover gets a larger token of its
--          own INCR).
-- server_ms: key_clock.lua, put before this.
local out = {}
local granted = {}  -- the ttls (ms, as given) granted in this call, each once
local any = false
local named = 0  -- the largest name counter taken away (GETDEL), as acquire.lua's next_token
for i = 1, (#KEYS - 2) / 3 do
  local key, readers = KEYS[3 * i], KEYS[3 * i + 2]
  -- acquire.lua's fast path: EXISTS of the key and its readers, both absent.
  if redis.call('exists', key, readers) == 0 then
    local ttl = ARGV[3 * i]
    redis.call('hset', key, ARGV[3 * i - 2], ARGV[3 * i - 1])
    redis.call('pexpire', key, ttl)
    local counted = tonumber(redis.call('getdel', KEYS[3 * i + 1]) or '0')
    if counted > named then named = counted end
    granted[ttl] = true
    any = true
    out[i] = 0  -- the fence, once known
  else
    out[i] = false
  end
end
if not any then return out end
-- acquire.lua's next_token() for ARGV[7] = 'n', once: see there for why each step.
local token
local counted = redis.pcall('incr', KEYS[1])
if type(counted) == 'number' then
  token = counted
else
  token = math.floor(tonumber(redis.call('get', KEYS[1])) or 0) + 1
end
if token <= 1 then
  local t = redis.call('time')
  token = tonumber(t[1]) * 1000000 + tonumber(t[2]) + 1
end
if token <= named then token = named + 1 end
if token ~= counted then redis.call('set', KEYS[1], token) end
-- acquire.lua's record_ttl(), once per ttl granted (the twin of that function: keep them alike).
local function record_ttl(ttl_arg)
  local now = server_ms()
  local ttl = tonumber(ttl_arg)
  local score = redis.pcall('zscore', KEYS[2], ttl_arg)
  if type(score) == 'string' and tonumber(score) >= now + ttl then return end
  local until_ms = now + 2 * ttl
  local added = redis.pcall('zadd', KEYS[2], 'gt', until_ms, ttl_arg)
  if type(added) ~= 'number' then
    if redis.call('type', KEYS[2]).ok ~= 'string' then error(added.err) end  -- e.g. OOM
    redis.call('del', KEYS[2])
    redis.call('zadd', KEYS[2], until_ms, ttl_arg)
  end
  if redis.call('pttl', KEYS[2]) < 2 * ttl then redis.call('pexpire', KEYS[2], 2 * ttl) end
end
for ttl in pairs(granted) do record_ttl(ttl) end
for i = 1, #out do
  if out[i] then out[i] = token end
end
return out
