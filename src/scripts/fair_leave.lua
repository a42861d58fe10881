-- fair_leave: a waiter gives up (wait limit, cancellation, error) and leaves the fair queue and
-- the writers waiting for readers. If it was first in line and the lock is free, the next live
-- waiter is told; if it was the last writer keeping new readers out, the readers are told.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the queue: dlock:queue:{NAME}, a zset waiter -> arrival ticket
-- KEYS[3]  the queue's liveness: dlock:queue-alive:{NAME}, a hash waiter -> deadline (ms, the
--          key's own clock: key_clock.lua)
-- KEYS[4]  writers waiting for readers: dlock:writers-waiting:{NAME}, a zset owner -> deadline
--          (ms, the key's own clock: key_clock.lua)
-- ARGV[1]  owner token (the waiter)
-- ARGV[2]  release channel (dlock:release:{NAME})
-- ARGV[3]  's' if KEYS[1] is slot 0 of a semaphore (the slot its fair waiters queue on), else ''
-- ARGV[4]  'publish', or 'spublish' on a Redis Cluster (waiters listen on shard channels)
--
-- When the lock is held by a hold of this version that nobody flagged (a plain client's, taken
-- while this waiter was queued or registered), the waiter flag is set on it (docs/protocol.md,
-- "The waiter flag"): those left in the queue are then named by its release. Without it the
-- next in line sleeps until its timer (up to a third of its waiter timeout), since an
-- unflagged release does not read the queue (it publishes '~' OWNER, which wakes plain waiters
-- and readers only).
--
-- The next in line is the first live waiter: waiters past their check-in deadline are dropped
-- on the way, as release.lua's walk drops them (naming a dead one left the live waiter behind
-- it asleep until its timer). For a semaphore, KEYS[1] is one slot of several, and another may
-- be free: the next in line is told whenever the leaver was first; if no slot is free its
-- attempt is refused, and the refusal flags the hold that refused it, whose release names it.
--
-- Replies 1 if the waiter was queued or registered here, 0 if not.
-- server_ms, key_clock: key_clock.lua, put before this.
local was_first = redis.call('zrange', KEYS[2], 0, 0)[1] == ARGV[1]
local removed = redis.call('zrem', KEYS[2], ARGV[1])
redis.call('hdel', KEYS[3], ARGV[1])
local was_writer = redis.call('zrem', KEYS[4], ARGV[1])
-- Registrations past their deadline go too, and the key with them if nothing but its anchor is
-- left: readers are told when no live writer waits any more.
if was_writer == 1 then
  local clock = key_clock()
  clock.prune(KEYS[4], clock.now(KEYS[4]))
end
-- The first waiter in line whose check-in deadline has not passed; dead ones are dropped.
local function next_live_waiter()
  local clock, now = nil, nil
  while true do
    local head = redis.call('zrange', KEYS[2], 0, 0)[1]
    if not head then return nil end
    local alive = tonumber(redis.call('hget', KEYS[3], head) or '0')
    clock = clock or key_clock()
    now = now or clock.now(KEYS[3], true)
    if alive >= now then return head end
    redis.call('zrem', KEYS[2], head)
    redis.call('hdel', KEYS[3], head)
  end
end
local free = redis.call('exists', KEYS[1]) == 0
local head = nil
if was_first and (free or ARGV[3] == 's') then head = next_live_waiter() end
if head then
  redis.pcall(ARGV[4], ARGV[2], head)  -- an ACL without &dlock:* refuses it: the queue moves on
elseif free then
  if was_writer == 1 and redis.call('exists', KEYS[4]) == 0 then
    redis.pcall(ARGV[4], ARGV[2], '~' .. ARGV[1])
  end
elseif was_writer == 1 or redis.call('exists', KEYS[2]) == 1 then
  -- pcall: GET of an older dlock's hash is an error table (its release always publishes); only
  -- a value that is a dlock hold is flagged, never a foreign one. pcall SETRANGE: a full
  -- server's refusal leaves the waiters to their timers, as before.
  local value = redis.pcall('get', KEYS[1])
  if type(value) == 'string' and string.find(value, '^dlock%. %S+ .') then
    redis.pcall('setrange', KEYS[1], 5, '!')
  end
end
return math.max(removed, was_writer)
