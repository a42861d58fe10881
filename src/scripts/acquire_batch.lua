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
--          (exact while the floor plus K stays below 2^53, as acquire.lua's below 2^53: a
--          counter from the clock in microseconds gets there in the 23rd century)
--   nil    nothing was changed for this name (its key or its readers exist, its counter is no
--          number, or the name came earlier in this call): the client sends it alone to
--          acquire.lua, whose other paths (held, a stale hold taken over, readers) then apply.
--          Never a refusal. The same name twice in one call: the first may be granted, the
--          second is nil (alone, a takeover gets a larger token of its own INCR).
-- server_ms: key_clock.lua, put before this.
local out = {}
local items = (#KEYS - 2) / 3
-- Everything that could fail is read before anything is written. A script that failed after
-- some grants would leave them written and their names' counters taken away; the call of each
-- name, then sent alone (node/coalescer.cc), would count from the floor only, which may be
-- behind a name's counter (a token below the name's last). So the floor must be a string or
-- absent (else every name goes alone, where acquire.lua fails as it does), and a name's counter
-- a number or absent (else that name goes alone).
local floor = redis.pcall('get', KEYS[1])
if type(floor) == 'table' then
  for i = 1, items do out[i] = false end
  return out
end
local counters = {}  -- per name granted: its counter's value, false if it has none
local seen = {}      -- the names met in this call: the same name twice, the second is nil
for i = 1, items do
  local key, readers, fence = KEYS[3 * i], KEYS[3 * i + 2], KEYS[3 * i + 1]
  -- acquire.lua's fast path: the key and its readers absent. One EXISTS tells that and that the
  -- name has no counter either (most names); else EXISTS again, and the counter read.
  if seen[key] then
    -- nil: the same name came earlier in this call
  elseif redis.call('exists', key, readers, fence) == 0 then
    counters[i] = false
  elseif redis.call('exists', key, readers) == 0 then
    local counted = redis.pcall('get', fence)
    if counted == false or (type(counted) == 'string' and tonumber(counted) ~= nil) then
      counters[i] = counted
    end
  end
  seen[key] = true
  out[i] = counters[i] ~= nil and 0 or false  -- a grant's fence, once known
end
local granted = {}  -- the ttls (ms, as given) granted in this call, each once
local count = 0  -- the names granted
local named = 0  -- the largest name counter taken away, as acquire.lua's next_token (GETDEL)
for i = 1, items do
  if out[i] then
    local ttl = ARGV[3 * i]
    redis.call('hset', KEYS[3 * i], ARGV[3 * i - 2], ARGV[3 * i - 1])
    redis.call('pexpire', KEYS[3 * i], ttl)
    if counters[i] then
      redis.call('del', KEYS[3 * i + 1])
      if tonumber(counters[i]) > named then named = tonumber(counters[i]) end
    end
    granted[ttl] = true
    count = count + 1
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
  base = math.floor(tonumber(floor) or 0)  -- read above: a string INCRBY cannot count
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
