-- release: gives back a hold of the lock and frees it (reentrant leases are counted by the
-- client, which releases once the last of them ends).
--
-- KEYS[1]  the lock key: the string "dlock" F " " HOLD_ID " " OWNER (acquire.lua; F the waiter
--          flag, '!' once a refused waiter or a waiting writer's grant asked for a wake-up), or
--          an older dlock's hash owner -> hold id (released as that dlock released it)
-- KEYS[2]  the fair queue of this name: dlock:queue:{NAME}, a zset waiter -> arrival ticket
-- KEYS[3]  the fair queue's liveness: dlock:queue-alive:{NAME}, a hash waiter -> deadline (ms,
--          the key's own clock: key_clock.lua); a waiter past its deadline is dead and dropped
-- ARGV[1]  owner token
-- ARGV[2]  release channel (dlock:release:{NAME})
-- ARGV[3]  hold id: only that hold is released (an older hold's late release never frees a
--          newer one); '' releases whatever hold the owner has (Client::unlock by owner)
-- KEYS[4]  the read holds: dlock:readers:{NAME}, a zset "HOLD_ID OWNER" -> expiry (ms, the
--          key's own clock: key_clock.lua)
-- ARGV[4]  'w' a write (exclusive) hold, 'r' a read hold
-- ARGV[5]  'publish', or 'spublish' on a Redis Cluster (waiters listen on shard channels)
-- KEYS[5]  only for a slot of a semaphore: the semaphore's permit record (acquire.lua); a
--          freed permit is counted off, and the record deleted with the last one; its release
--          always publishes (any slot's release wakes the semaphore's waiters)
--
-- A read hold frees the lock only when it was the last live reader and no writer holds (a
-- writer that also reads); until then nothing is published.
--
-- When the lock is freed, publishes on the release channel the fair queue's first live waiter
-- (only that waiter wakes: no thundering herd), or, when nobody queues, '~' and the releasing
-- owner (plain waiters wake and retry; the releasing client knows its own release by it).
-- Except a write hold whose waiter flag is '.' (not a semaphore slot): nobody was refused by it
-- (docs/protocol.md, "The waiter flag"), so nobody queues for it: the queue is not read, and
-- '~' and the owner are published.
--
-- Replies an integer (a table reply costs Redis about as much as two inner commands):
--   n >= 0  freed: the key was deleted and the release published; n is how many connections
--           were subscribed to the release channel (PUBLISH's count), which tells the
--           releasing client whether anyone else waits (see lock/hand_off.h)
--   0       also: a read hold released; other readers (or the reader's own write hold) remain
--   -1      this hold is not here (expired, taken by another, or never ours): unchanged
-- One GET tells the cases apart: redis.pcall returns an error table, not a failure, for a hash
-- (an older dlock's hold, then read by HGET); a string that is no dlock hold is another
-- library's: not ours, never touched.
-- server_ms, key_clock: key_clock.lua, put after the fast path.
--
-- The fast path, first: a write hold released by its hold id, unflagged (nobody was refused by
-- it), no semaphore slot: GET, DEL, PUBLISH, before any function is made (key_clock.lua's two
-- cost this path about as much as an inner command each). The value is compared whole, not
-- parsed. Anything else goes on below, which reads the key again.
if ARGV[4] == 'w' and ARGV[3] ~= '' and not KEYS[5] and
    redis.pcall('get', KEYS[1]) == 'dlock. ' .. ARGV[3] .. ' ' .. ARGV[1] then
  redis.call('del', KEYS[1])
  -- pcall: as the PUBLISH at the end.
  local told = redis.pcall(ARGV[5], ARGV[2], '~' .. ARGV[1])
  if type(told) ~= 'number' then return 0 end
  return told
end
-- key_clock.lua goes here (script.cc).
local clock = nil  -- made only when a key with deadlines is read
local walk = true  -- read the fair queue for its first live waiter
if ARGV[4] == 'r' then
  clock = key_clock()
  local member = nil
  if ARGV[3] ~= '' then
    member = ARGV[3] .. ' ' .. ARGV[1]
  else
    -- Hold ids have no space: the owner is everything after the first one (the anchor '' has
    -- none).
    for _, m in ipairs(redis.call('zrange', KEYS[4], 0, -1)) do
      local space = string.find(m, ' ', 1, true)
      if space and string.sub(m, space + 1) == ARGV[1] then member = m end
    end
  end
  local now = clock.now(KEYS[4])
  local expiry = member and tonumber(redis.call('zscore', KEYS[4], member) or '0')
  if not expiry or expiry <= now then return -1 end
  redis.call('zrem', KEYS[4], member)
  clock.prune(KEYS[4], now)
  if redis.call('exists', KEYS[1], KEYS[4]) > 0 then return 0 end
else
  local value = redis.pcall('get', KEYS[1])
  local flag, id, owner = '!', nil, nil
  if type(value) == 'string' then
    flag, id, owner = string.match(value, '^dlock([.!]) (%S+) (.+)$')
  elseif value then
    -- An older dlock's hash (or another type: HGET fails too, not ours): as that dlock did,
    -- and always published (its waiters listen and never flag).
    id = redis.pcall('hget', KEYS[1], ARGV[1])
    owner = ARGV[1]
  end
  if owner ~= ARGV[1] or type(id) ~= 'string' or (ARGV[3] ~= '' and id ~= ARGV[3]) then
    return -1
  end
  redis.call('del', KEYS[1])
  if KEYS[5] then
    if redis.call('hincrby', KEYS[5], 'held', -1) <= 0 then redis.call('del', KEYS[5]) end
  else
    -- Unflagged: nobody was refused by this hold, so nobody queues behind it: the queue is not
    -- read. Still published ('~' and the owner: plain waiters and readers wake, no fair
    -- waiter): a waiter that sleeps on a timer after a refusal by another hold (one that lost
    -- its quorum and was given back at once) hears every release, and the count tells this
    -- client that others listen, so that its hand-off grace holds it back. Without the
    -- message one worker took a lock 436 times in a row while three others waited, and a
    -- reader waited 10.5 s with no fault running (chaos, seed 20261128).
    walk = flag ~= '.'
  end
end
local next_waiter = '~' .. ARGV[1]
local alive_now = nil  -- the queue's clock, read only if somebody queues
while walk do
  local head = redis.call('zrange', KEYS[2], 0, 0)[1]
  if not head then break end
  local alive = tonumber(redis.call('hget', KEYS[3], head) or '0')
  clock = clock or key_clock()
  alive_now = alive_now or clock.now(KEYS[3], true)
  if alive >= alive_now then
    next_waiter = head
    break
  end
  redis.call('zrem', KEYS[2], head)
  redis.call('hdel', KEYS[3], head)
end
-- pcall: the lock is freed by now, so a PUBLISH the user's ACL refuses (no &dlock:* channels:
-- Redis 7's acl-pubsub-default) must not turn the release into an error; nobody is counted.
local told = redis.pcall(ARGV[5], ARGV[2], next_waiter)
if type(told) ~= 'number' then return 0 end
return told
