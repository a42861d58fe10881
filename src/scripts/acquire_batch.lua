-- acquire_batch: group commit (docs/protocol.md, "Group commit"): K write acquisitions on one
-- node in one call, each with an outcome of its own. Per name it runs only acquire.lua's path
-- for a free name (no key, no readers: the hold written by SET NX PX as acquire.lua's fast path
-- writes it, the string "dlock. HOLD_ID OWNER"), with the counter the name's client uses
-- (acquire.lua's ARGV[7]: 'n' the node's, '' the name's), or nothing at all; the per-node work
-- (one write of the floor, the max-ttl record) is done once per call.
--
-- KEYS[1]  dlock:fence-floor (acquire.lua KEYS[3]): the node's counter
-- KEYS[2]  dlock:max-ttl (acquire.lua KEYS[4]): the ttls of leases that may still live here
-- KEYS[3i], KEYS[3i + 1], KEYS[3i + 2]  for the i-th name (i = 1..K): the lock key NAME, its
--          counter dlock:fence:{NAME} and its readers dlock:readers:{NAME} (acquire.lua KEYS[1],
--          KEYS[2], KEYS[5])
-- ARGV[4i - 3], ARGV[4i - 2], ARGV[4i - 1], ARGV[4i]  the i-th owner token, hold id, ttl in ms
--          and counter: 'n' the node's, '' the name's (acquire.lua ARGV[1..3] and ARGV[7])
--
-- Replies an array of K elements, the i-th for the i-th name:
--   fence  granted, exactly as acquire.lua grants a free name; the names granted in this call
--          get their tokens in item order as K calls of acquire.lua one after the other would,
--          or larger: by the node's counter, the floor plus one, raised above the counter of
--          every node-counted name granted in the call (each taken away), so larger than every
--          token this node handed out before, for any name (docs/features.md: on a lock set of
--          one node the next holder of any name gets a larger one); by the name's, its counter
--          (else the floor) plus one, written back with the lease's ttl. The floor follows
--          every token above it, written once at the end (exact while the floor plus K stays
--          below 2^53, as acquire.lua's below 2^53: a counter from the clock in microseconds
--          gets there in the 23rd century)
--   nil    nothing was changed for this name (its key (of any type: a dlock string, an older
--          dlock's hash, a foreign key) or its readers exist, its counter is no
--          number, the floor is no number and the name counts by its own counter, or one of
--          its keys is a key of a name earlier in this call): the client sends it alone to
--          acquire.lua, whose other paths (held, a stale hold taken over, readers, an error)
--          then apply. Never a refusal. The same name twice in one call: the first may be
--          granted, the second is nil (alone, a takeover gets a larger token of its own).
-- server_ms: key_clock.lua, put before this.
local out = {}
local items = (#KEYS - 2) / 3
-- Everything that could fail is read before anything is written. A script that failed after
-- some grants would leave them written and their names' counters taken away; the call of each
-- name, then sent alone (node/coalescer.cc), would count from the floor only, which may be
-- behind a name's counter (a token below the name's last). So the floor must be a string or
-- absent (else every name goes alone, where acquire.lua fails as it does), and a name's counter
-- a number or absent (else that name goes alone). acquire.lua by the name's counter fails on a
-- floor that is no number (it compares the token with it): those names go alone too. Numbers a
-- Lua number cannot count up exactly (nan, inf, 2^53 and beyond; no dlock writes them) are no
-- numbers here: INCR counts them in Redis, `+ 1` here would hand one token out twice.
local function countable(text)
  local n = tonumber(text)
  if n and n == n and n > -2 ^ 53 and n < 2 ^ 53 then return n end
  return nil
end
local floor = redis.pcall('get', KEYS[1])
if type(floor) == 'table' or (floor and tonumber(floor) and not countable(floor)) then
  for i = 1, items do out[i] = false end
  return out
end
local floor_number = floor and countable(floor)
-- A count at or below 10^15 is none (acquire.lua's count_of(), which says why): such a floor is
-- absent here (counted from the clock, and written over at the end), such a name's counter too.
if floor_number and floor_number <= 1e15 then floor, floor_number = false, nil end
local function count_of(text)
  local n = text and countable(text)
  if n and n > 1e15 then return n end
  return nil
end
local counters = {}  -- per name granted: its counter's value, false if it has none
-- Every key of the names met in this call. A name whose keys meet another's (the same name
-- twice, or a lock named after another name's counter or readers key: "dlock:fence:{A}" beside
-- A) is nil, in either order: each name's writes would land on the other's key, checked by
-- neither, where their single calls fail (WRONGTYPE) or see each other.
local reserved = {}
for i = 1, items do
  local key, readers, fence = KEYS[3 * i], KEYS[3 * i + 2], KEYS[3 * i + 1]
  local by_node = ARGV[4 * i] == 'n'
  -- acquire.lua's fast path: the readers absent (and, for the node's counter, the name's
  -- counter, which most names do not have: one EXISTS; else the counter read), then the key
  -- written by SET NX PX, which leaves an existing key (any type) alone: that name is nil. The
  -- write happens here, before the tokens: nothing below fails on a name's data (the floor and
  -- every counter were checked), so no grant is left behind by a failing call.
  if reserved[key] or reserved[readers] or reserved[fence] or
      (not by_node and floor and not floor_number) then
    -- nil: its keys meet an earlier name's, or acquire.lua would fail on the floor
  elseif by_node and redis.call('exists', readers, fence) == 0 then
    counters[i] = false
  elseif redis.call('exists', readers) == 0 then
    local counted = redis.pcall('get', fence)
    if counted == false or (type(counted) == 'string' and countable(counted)) then
      counters[i] = counted
    end
  end
  if counters[i] ~= nil and not redis.call('set', key, 'dlock. ' .. ARGV[4 * i - 2] .. ' ' ..
      ARGV[4 * i - 3], 'nx', 'px', ARGV[4 * i - 1]) then
    counters[i] = nil  -- the key exists: alone, acquire.lua's other paths
  end
  reserved[key], reserved[readers], reserved[fence] = true, true, true
  out[i] = counters[i] ~= nil and 0 or false  -- a grant's fence, once known
end
-- The tokens, in item order, as acquire.lua's next_token() one call after the other would hand
-- them out (see there for why each step): `running` is the floor as those calls would leave it.
-- A node without a floor counts from its clock in microseconds, as acquire.lua's counter().
local running = floor_number and math.floor(floor_number)
local start = running
local clock = nil
local function from_clock()
  if not clock then
    local t = redis.call('time')
    clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return clock
end
-- The largest counter of a name granted by the node's counter (each taken away below): every
-- such grant is above all of them, as the first version's one INCRBY for the call was.
local named = 0
for i = 1, items do
  if out[i] and ARGV[4 * i] == 'n' and counters[i] then
    named = math.max(named, tonumber(counters[i]))
  end
end
local granted = {}  -- the ttls (ms, as given) granted in this call, each once
local count = 0     -- the names granted
for i = 1, items do
  if out[i] then
    local key, fence, ttl = KEYS[3 * i], KEYS[3 * i + 1], ARGV[4 * i - 1]
    local token
    if ARGV[4 * i] == 'n' then
      -- The node's counter: INCR of the floor (1 or less: there was none, the clock), above
      -- the names' counters, which are taken away.
      local base = (running and running > 0) and running or from_clock()
      token = math.max(base, named) + 1
      if counters[i] then redis.call('del', fence) end
    else
      -- The name's counter, else the floor, else the clock; written back with the lease's ttl.
      token = (count_of(counters[i]) or running or from_clock()) + 1
      redis.call('set', fence, token, 'px', ttl)
    end
    -- acquire.lua raises the floor to a token above it; one that counts nothing, to at least the
    -- clock (its raise_floor()).
    if not running then
      running = math.max(token, from_clock())
    elseif token > running then
      running = token
    end
    out[i] = token
    granted[ttl] = true
    count = count + 1
  end
end
if count == 0 then return out end
if running ~= start then redis.call('set', KEYS[1], running) end
-- acquire.lua's record_ttl(), once per ttl granted (the twin of that function: keep them alike).
local function record_ttl(ttl_arg)
  local now = server_ms()
  local ttl = tonumber(ttl_arg)
  local score = redis.pcall('zscore', KEYS[2], ttl_arg)
  if type(score) == 'string' and tonumber(score) >= now + ttl + math.floor(ttl / 2) then return end
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
return out
