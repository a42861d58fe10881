-- fence_raise: second phase of a fencing token on N nodes; raises this node's count of the name
-- to the token handed out, so that a majority holds it and every later acquisition sees it, and
-- says whether the hold the token is for is still on this node. Only then may the client count the
-- answer: a hold gone since its grant (an operator's force_release, a server clock step that
-- expired the key early, another server behind the address) may have let another holder in
-- here with a counter below the token, which the raise would then seem to confirm.
--
-- KEYS[1]  the fencing counter of the name: dlock:fence:{NAME} (expires, see acquire.lua)
-- KEYS[2]  this node's fence floor: dlock:fence-floor
-- KEYS[3]  where the hold is: a write hold's lock key (the name; a semaphore's slot is one),
--          the string "dlock" F " " HOLD_ID " " OWNER (acquire.lua), or an older dlock's hash
--          owner -> hold id; for a read hold dlock:readers:{NAME}, a zset whose member is
--          "HOLD_ID OWNER". In the name's Redis Cluster slot, as KEYS[1]
-- ARGV[1]  the token (a positive integer)
-- ARGV[2]  the lock's ttl in milliseconds: how long the counter is kept at least
-- ARGV[3]  owner token
-- ARGV[4]  hold id
-- ARGV[5]  'w' a write hold, 'r' a read hold
--
-- The count is raised to ARGV[1] whether the hold is here or not: counters only grow, so a raise
-- never lowers a token handed out later, and a node left behind would answer below the name's
-- tokens for as long as it is in use (issue 28). The floor is raised, and the name's counter
-- only where it exists: an absent one counts from the floor (acquire.lua), and one written here
-- would send this client's next grants of the name (by the node's counter, which only the floor
-- serves) off acquire.lua's fast path, to take it away, for a ttl. A node with neither counter
-- nor floor (it lost its memory) counts from its clock in microseconds, as acquire.lua's
-- counter() does: it is not lowered to the token. A count at or below 10^15 is none here as in
-- acquire.lua (count_of()): raised to a token below the clock, it would take the node's next
-- count from the clock down to that token.
--
-- Replies the counter after the call (never lower than ARGV[1]) if the hold is here, else -1.
local function count_of(text)
  if text and (tonumber(text) or 2e15) <= 1e15 then return nil end
  return text
end
local named = count_of(redis.call('get', KEYS[1]))
local clock_read = nil  -- the server's clock in microseconds, read once
local function clock_us()
  if not clock_read then
    local t = redis.call('time')
    clock_read = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return clock_read
end
local function counter()
  local known = named or count_of(redis.call('get', KEYS[2]))
  if known then return tonumber(known) end
  return clock_us()
end
-- pcall: a key of another type (not dlock's) holds no hold of ours.
local here
if ARGV[5] == 'r' then
  here = type(redis.pcall('zscore', KEYS[3], ARGV[4] .. ' ' .. ARGV[3])) == 'string'
else
  -- pcall: GET of a hash (an older dlock's hold) is an error table: read by HGET.
  local value = redis.pcall('get', KEYS[3])
  if type(value) == 'string' then
    local id, owner = string.match(value, '^dlock[.!] (%S+) (.+)$')
    here = owner == ARGV[3] and id == ARGV[4]
  elseif value then
    here = redis.pcall('hget', KEYS[3], ARGV[3]) == ARGV[4]
  else
    here = false
  end
end
local current = counter()
local token = tonumber(ARGV[1])
if current < token then
  if named then redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2]) end
  -- As acquire.lua's raise_floor(): a floor that counts nothing is written at least the clock
  -- (the node counted every name from there; a name's counter may be below it).
  local floor = redis.call('get', KEYS[2])
  if not count_of(floor) then
    redis.call('set', KEYS[2], math.max(token, clock_us()))
  elseif token > tonumber(floor) then
    redis.call('set', KEYS[2], ARGV[1])
  end
  current = token
end
if not here then return -1 end
return current
