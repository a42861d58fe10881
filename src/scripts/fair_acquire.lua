-- fair_acquire: takes the lock in arrival order. Waiters queue in a zset scored by their
-- arrival ticket (the same on every node, so all nodes agree on the order); the lock goes to
-- the first live waiter only. A waiter that stops calling is dropped after its timeout, so a
-- dead waiter never stalls the queue.
--
-- KEYS[1]  the lock key: the string "dlock" F " " HOLD_ID " " OWNER with a ttl (as in
--          acquire.lua; F the waiter flag); an older dlock's hash or a foreign key is held,
--          never touched
-- KEYS[2]  the fencing counter of this name: dlock:fence:{NAME} (as in acquire.lua)
-- KEYS[3]  the queue: dlock:queue:{NAME}, a zset waiter -> arrival ticket
-- KEYS[4]  the queue's liveness: dlock:queue-alive:{NAME}, a hash waiter -> deadline (ms, the
--          key's own clock: key_clock.lua, anchored by its field '')
-- KEYS[5]  this node's fence floor: dlock:fence-floor (as in acquire.lua)
-- KEYS[6]  dlock:max-ttl (as in acquire.lua: a zset ttl -> until when, raised on a grant)
-- ARGV[1]  owner token (the waiter)
-- ARGV[2]  hold id (as in acquire.lua)
-- ARGV[3]  ttl in milliseconds
-- ARGV[4]  arrival ticket (milliseconds since the epoch when the waiter first asked)
-- ARGV[5]  waiter timeout in milliseconds: dropped from the queue if not back by then
-- ARGV[6]  '1' to join the queue when the lock cannot be had now, '0' to only try (try_lock)
-- KEYS[7]  the read holds: dlock:readers:{NAME} (as in acquire.lua, on the key's own clock): a
--          fair writer also waits for live readers to leave
-- KEYS[8]  writers waiting for readers: dlock:writers-waiting:{NAME} (as in acquire.lua, on the
--          key's own clock); a queued writer refused because of readers is registered there
--          until its timeout
-- KEYS[9]  only for a slot of a semaphore: the semaphore's permit record (as KEYS[7] of
--          acquire.lua)
-- ARGV[7]  only with KEYS[9]: the permit count this client uses (as ARGV[7] of acquire.lua)
--
-- A grant is flagged '!' (the grantee's release walks the queue and wakes the next) when the
-- queue still has a waiter after the grantee left it, or the grantee was registered as a
-- waiting writer (readers it kept out wait for its release); else '.'. A refusal by a dlock
-- string hold flags that hold '!' (as in acquire.lua).
--
-- Replies as acquire.lua: {1, fence, 0} acquired (an older hold of the same client is taken
-- over, as there, but never while a reader is live), or {0, fence, pttl} not acquired, where
-- pttl is the holder's remaining ttl, or -2 when the lock is free but another waiter is first
-- in line; {0, fence, pttl, 1} when live readers kept it and the waiter was registered as a
-- waiting writer (pttl: the last reader's remaining ms); {-1, fence, n} a semaphore slot whose
-- record says n permits, not ARGV[7] (nothing changed, not queued).
-- server_ms, key_clock: key_clock.lua, put before this.
local t = redis.call('time')
-- The server's clock, for the node's record of live ttls (KEYS[6]: a node key, never moved
-- alone); the queue's deadlines are on their key's clock.
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local clock = key_clock()
local alive_now = clock.now(KEYS[4], true, now)
local owner = ARGV[1]
-- As acquire.lua's: the counter, the floor, else the clock in microseconds; a count at or below
-- 10^15 is none (acquire.lua's count_of(), which says why).
local function count_of(text)
  if text and (tonumber(text) or 2e15) <= 1e15 then return nil end
  return text
end
local function counter()
  local known = count_of(redis.call('get', KEYS[2])) or count_of(redis.call('get', KEYS[5]))
  if known then return tonumber(known) end
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function next_token()
  local token = counter() + 1
  redis.call('set', KEYS[2], token, 'px', ARGV[3])
  -- As acquire.lua's raise_floor(): a floor that counts nothing is written at least the clock.
  local floor = redis.call('get', KEYS[5])
  if not count_of(floor) then
    redis.call('set', KEYS[5], math.max(token, tonumber(t[1]) * 1000000 + tonumber(t[2])))
  elseif token > tonumber(floor) then
    redis.call('set', KEYS[5], token)
  end
  -- As acquire.lua's record_ttl (a string there is an older dlock's record: replaced).
  local ttl = tonumber(ARGV[3])
  local added = redis.pcall('zadd', KEYS[6], 'gt', now + ttl, ttl)
  if type(added) ~= 'number' then
    if redis.call('type', KEYS[6]).ok ~= 'string' then error(added.err) end  -- e.g. OOM
    redis.call('del', KEYS[6])
    redis.call('zadd', KEYS[6], now + ttl, ttl)
  end
  if redis.call('pttl', KEYS[6]) < ttl then redis.call('pexpire', KEYS[6], ttl) end
  return token
end
local record = KEYS[9]
if record then
  local n = redis.call('hget', record, 'n')
  if n and n ~= ARGV[7] then return {-1, counter(), tonumber(n)} end
end
-- A grant of a semaphore's slot records the count, and the record outlives the slot.
local function record_permit(fresh)
  if not record then return end
  if fresh then redis.call('hincrby', record, 'held', 1) end
  redis.call('hset', record, 'n', ARGV[7])
  if redis.call('pttl', record) < redis.call('pttl', KEYS[1]) then
    redis.call('pexpire', record, redis.call('pttl', KEYS[1]))
  end
end

-- Drop dead waiters from the head of the line.
local head
while true do
  head = redis.call('zrange', KEYS[3], 0, 0)[1]
  if not head then break end
  if head ~= owner and tonumber(redis.call('hget', KEYS[4], head) or '0') < alive_now then
    redis.call('zrem', KEYS[3], head)
    redis.call('hdel', KEYS[4], head)
  else
    break
  end
end

-- The lock key: 'none', 'dlock' (a string hold of this version: `flag`, `held_id`,
-- `held_owner`), or 'other' (an older dlock's hash, read by GET as an error table, or a foreign
-- key): held, never touched.
local value = redis.pcall('get', KEYS[1])
local kind, flag, held_id, held_owner = 'none', nil, nil, nil
if value then
  kind = 'other'
  if type(value) == 'string' then
    flag, held_id, held_owner = string.match(value, '^dlock([.!]) (%S+) (.+)$')
    if flag then kind = 'dlock' end
  end
end
-- As in acquire.lua: only an older hold of this client is stale.
local function older_hold_of_this_client(id)
  local client, n = string.match(id, '^(.*)%.(%d+)$')
  local my_client, my_n = string.match(ARGV[2], '^(.*)%.(%d+)$')
  -- <=: this very hold, met again (one server named twice, or a duplicated request), is
  -- ours as well: refusing it would make an acquisition refuse itself.
  return client ~= nil and client == my_client and tonumber(n) <= tonumber(my_n)
end
local stale_mine = held_owner == owner and older_hold_of_this_client(held_id)
-- Live readers keep the lock from writers, also from a takeover (checked first: no write hold
-- is ever granted beside a live reader); how long the last of them has left (0: none).
local readers_left = 0
if (stale_mine or (kind == 'none' and (not head or head == owner))) and
    redis.call('exists', KEYS[7]) == 1 then
  local readers_now = clock.now(KEYS[7], false, now)
  clock.prune(KEYS[7], readers_now)
  local _, expiry = clock.entry(KEYS[7], true)
  if expiry then readers_left = expiry - readers_now end
end
-- A grant: the grantee leaves the queue and the waiting writers; the hold is flagged if
-- somebody waits for its release (above), or kept flagged (a stale hold's waiters still wait).
-- A stale hold's ttl is never shortened.
local function grant(fresh)
  local registered = redis.call('zrem', KEYS[8], owner)
  redis.call('zrem', KEYS[3], owner)
  redis.call('hdel', KEYS[4], owner)
  if registered == 1 or redis.call('exists', KEYS[3]) == 1 then flag = '!' end
  local hold = 'dlock' .. (flag or '.') .. ' ' .. ARGV[2] .. ' ' .. owner
  local ttl = tonumber(ARGV[3])
  if not fresh then ttl = math.max(ttl, redis.call('pttl', KEYS[1])) end
  redis.call('set', KEYS[1], hold, 'px', ttl)
  record_permit(fresh)
  return {1, next_token(), 0}
end
if stale_mine and readers_left == 0 then
  -- A stale hold of this owner: taken over, as in acquire.lua.
  return grant(false)
end
if kind == 'none' and (not head or head == owner) and readers_left == 0 then
  return grant(true)
end

if ARGV[6] == '1' then
  if not redis.call('zscore', KEYS[3], owner) then
    redis.call('zadd', KEYS[3], ARGV[4], owner)
  end
  local timeout = tonumber(ARGV[5])
  redis.call('hset', KEYS[4], owner, alive_now + timeout)
  -- The queue keys go away by themselves once nobody has waited for a while.
  redis.call('pexpire', KEYS[3], timeout * 4)
  redis.call('pexpire', KEYS[4], timeout * 4)
  clock.mark(KEYS[4], true, alive_now)
end
local pttl = -2
if kind ~= 'none' then pttl = redis.call('pttl', KEYS[1]) end
-- Refused by a dlock string hold: flagged, so that its release wakes this waiter (acquire.lua's
-- refused_by() says why; pcall: as there).
if flag == '.' then redis.pcall('setrange', KEYS[1], 5, '!') end
if readers_left > 0 then
  if ARGV[6] == '1' then
    local timeout = tonumber(ARGV[5])
    local writers_now = clock.now(KEYS[8], false, now)
    redis.call('zadd', KEYS[8], writers_now + timeout, owner)
    if redis.call('pttl', KEYS[8]) < timeout then redis.call('pexpire', KEYS[8], timeout) end
    clock.mark(KEYS[8], false, writers_now)
    return {0, counter(), readers_left, 1}
  end
  pttl = readers_left
end
return {0, counter(), pttl}
