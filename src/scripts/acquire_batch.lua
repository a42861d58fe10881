-- acquire_batch: group commit (docs/protocol.md, "Group commit"): K write acquisitions on one
-- node in one call, each with an outcome of its own. Per name it runs only acquire.lua's fast
-- path with the node's counter (ARGV[7] = 'n': a free name, no readers), or nothing at all; the
-- per-node work (one INCRBY of the floor, the max-ttl record) is done once per call.
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
--   fence  granted, exactly as acquire.lua grants a free name: the names granted in this call
--          get the tokens above the floor in their order, one INCRBY of the floor by their
--          number, so each is what K calls of acquire.lua one after the other would hand out:
--          larger than every token this node handed out before, for any name
--          (docs/features.md: on a lock set of one node the next holder of any name gets a
--          larger one)
--   nil    nothing was changed for this name (its key or its readers exist): the client sends
--          it alone to acquire.lua, whose other paths (held, a stale hold taken over, readers)
--          then apply. Never a refusal. The same name twice in one call: the first may be
--          granted, the second meets its key and is nil (a takeover gets a larger token of its
--          own INCR).
-- server_ms: key_clock.lua, put before this.
local out = {}
local granted = {}  -- the ttls (ms, as given) granted in this call, each once
local count = 0  -- the names granted
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
    count = count + 1
    out[i] = 0  -- the fence, once known
  else
    out[i] = false
  end
end
if count == 0 then return out end
-- acquire.lua's next_token() for ARGV[7] = 'n', once for `count` grants: see there for why each
-- step. `base` is the floor before them (what INCR starts from); the grants get base + 1 ..
-- base + count, and the floor ends at the last.
local base
local counted = redis.pcall('incrby', KEYS[1], count)
if type(counted) == 'number' then
  base = counted - count
else
  base = math.floor(tonumber(redis.call('get', KEYS[1])) or 0)
end
if base <= 0 then  -- there was no floor: count from the clock, as acquire.lua's counter() does
  local t = redis.call('time')
  base = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
if base < named then base = named end
if base + count ~= counted then redis.call('set', KEYS[1], base + count) end
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
local token = base
for i = 1, #out do
  if out[i] then
    token = token + 1
    out[i] = token
  end
end
return out
