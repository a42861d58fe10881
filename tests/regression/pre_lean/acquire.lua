-- acquire.lua as dlock shipped it before issue 32's lean scripts (commit 8b836e2), with the
-- key_clock.lua prelude the library put before it: an older client on the same nodes
-- (tests/regression/issue_32_test.cc). A grant replies {1, token, 0}.
-- key_clock: not a script of its own. script.cc puts it before the scripts that keep deadlines
-- inside a key (acquire, fair_acquire, release, renew, inspect, fair_leave): read holds
-- (dlock:readers:{NAME}), waiting writers (dlock:writers-waiting:{NAME}) and the fair queue's
-- check-in deadlines (dlock:queue-alive:{NAME}). No KEYS, ARGV or reply of its own.
--
-- Why a key's own clock: a deadline written as an absolute time of the server's clock goes
-- wrong when its key moves to a master whose clock disagrees (a Redis Cluster slot moved with
-- MIGRATE, as `redis-cli --cluster reshard` does, keeps each key's remaining ttl, not the times
-- in its scores). On a master whose clock is ahead, a live reader would count as expired and a
-- writer be let in beside it; behind, dead entries would outlive their lease.
--
-- How: the reserved member '' of the key (a zset member or a hash field; no entry is named
-- '': owners are never empty, and a read hold's member always has a space) is the anchor: the
-- time on the key's clock at which the key expires. A key's remaining ttl runs down in real
-- time on any master, and MIGRATE keeps it, so the key's clock reads anchor - PTTL wherever
-- the key is. Every write that may change the key's ttl writes the anchor again (clock_mark).
-- A key without an anchor (written by an older dlock) is on the server's clock, and its
-- first write anchors it there. One ZSCORE or HGET and one PTTL per key read: O(1).
--
-- The helpers are made by key_clock(), called only on the paths that read such a key: each
-- function defined at a script's top level is made anew on every call, and five of them cost
-- the write fast path (which never reads these keys) about 10% more Redis CPU per acquire.

local function server_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function key_clock()
  local clock = {}

  -- The key's clock now (ms); `hash`: the key is a hash, else a zset. The server's clock for a
  -- key without an anchor (absent, or written before anchors), or without a ttl: `server_now`
  -- if the script read it already (TIME once per script), else read now.
  function clock.now(key, hash, server_now)
    local anchor
    if hash then
      anchor = redis.call('hget', key, '')
    else
      anchor = redis.call('zscore', key, '')
    end
    if anchor then
      local left = redis.call('pttl', key)
      if left > 0 then return tonumber(anchor) - left end
    end
    return server_now or server_ms()
  end

  -- After a write to `key` (its ttl may have changed), `now` being the key's clock read before
  -- it: the anchor is when, on that clock, the key expires now.
  function clock.mark(key, hash, now)
    local left = redis.call('pttl', key)
    if left <= 0 then return end
    if hash then
      redis.call('hset', key, '', now + left)
    else
      redis.call('zadd', key, now + left, '')
    end
  end

  -- Drops the entries of zset `key` whose deadline is past `now` (its clock). The anchor stays
  -- (it is the key's expiry, later than now while the key lives); a key left with nothing but
  -- its anchor is deleted, so that "the key exists" keeps meaning "an entry is live or
  -- unpruned".
  function clock.prune(key, now)
    redis.call('zremrangebyscore', key, '-inf', now)
    if redis.call('zcard', key) == 1 and redis.call('zscore', key, '') then
      redis.call('del', key)
    end
  end

  -- The earliest (`last` false) or latest (`last` true) entry of zset `key` that is not the
  -- anchor: member, deadline; nil if there is none.
  function clock.entry(key, last)
    local from, to, step = 1, 3, 2
    local range
    if last then
      range = redis.call('zrange', key, -2, -1, 'withscores')
      from, to, step = #range - 1, 1, -2
    else
      range = redis.call('zrange', key, 0, 1, 'withscores')
    end
    for i = from, to, step do
      if range[i] and range[i] ~= '' then return range[i], tonumber(range[i + 1]) end
    end
    return nil
  end

  return clock
end
-- acquire: takes the lock for a new hold of an owner. Reentrancy is counted by the client (one
-- hold per owner on the server), so this script never adds to an existing hold. This very hold
-- found here (the same server reached twice in one round) is granted again. An older hold
-- of the same client found here is stale (its release was lost: the client asks for a new hold
-- only when it has no live one) and is taken over by the new hold id, with a fencing token
-- raised as for any new holder. Any other hold of the same owner is held: a later hold of the
-- same client (this call is an older attempt that ran late), or another client's (two clients
-- naming one owner would otherwise both believe they hold it).
--
-- KEYS[1]  the lock key (the name the user gave): a hash owner -> hold id, with a ttl
-- KEYS[2]  the fencing counter of this name: dlock:fence:{NAME}, an integer that expires with
--          the lock (ttl ms after the last grant): Redis keeps nothing for unused names
-- KEYS[3]  this node's fence floor: dlock:fence-floor, the largest token it ever handed out or
--          was raised to, for any name; a counter that expired starts again from it, so the
--          tokens of a name grow across its counter's lifetimes; a node without one counts from
--          its clock in microseconds (counter() below)
-- KEYS[4]  dlock:max-ttl, the ttls (ms) of leases that may still live here (hello.lua): a zset
--          ttl -> until when (ms, this server's clock), the key as long-lived as its last entry.
--          A grant records ARGV[3] for ARGV[3] ms, so every node that holds a key knows its ttl,
--          also when the greeting that announced it missed this node (a restart quarantine
--          computed from it is then long enough), and forgets it once no such lease can live
-- ARGV[1]  owner token
-- ARGV[2]  hold id: unique per acquisition, "CLIENT.N" with N growing per client; release and
--          renew act only when it matches
-- ARGV[3]  ttl in milliseconds
-- KEYS[5]  the read holds of this name: dlock:readers:{NAME}, a zset "HOLD_ID OWNER" -> expiry
--          (ms, the key's own clock: key_clock.lua, anchored by its member ''); the key lives
--          as long as its longest-lived reader
-- KEYS[6]  writers waiting for the readers to leave: dlock:writers-waiting:{NAME}, a zset
--          owner -> deadline (ms, the key's own clock, as KEYS[5])
-- ARGV[4]  'w' a write (exclusive) hold, 'r' a read (shared) hold
-- ARGV[5]  writes: how long (ms) a writer refused because of readers is registered as waiting,
--          so new readers stay out meanwhile; '0' not to register (try_lock)
-- ARGV[6]  writes: '1' if this owner may have registered as waiting before (drop it on a grant)
-- KEYS[7]  only for a slot of a semaphore: the semaphore's permit record, a hash
--          n -> the permit count, held -> permits granted on this node and not released yet;
--          it lives at least as long as every permit of the semaphore on this node (a grant
--          raises its ttl to the slot's, renew.lua re-arms it beside the permits, the release
--          of the last permit deletes it)
-- ARGV[7]  only with KEYS[7]: the permit count this client uses; a record of another count
--          refuses the grant, a grant records it
--
-- A write hold needs the lock key absent (or stale, below) and no live reader. A read hold
-- needs no writer (except the reader's own write hold: a writer may also read, a downgrade)
-- and, when no writer holds, no live waiting writer. Both kinds draw from one fencing counter,
-- so a writer's token is larger than the token of every reader and writer before it.
--
-- Replies {status, fence, detail}:
--   {1, fence, 0}     acquired (the key was absent, or held by an older hold of this client):
--                     fence is the counter after the increment; the key expires in ARGV[3] ms,
--                     or later if a stale hold had more left (a ttl is never shortened)
--   {0, fence, pttl}  held: by another owner, by another hold of this owner (above), or by a
--                     key that is not a dlock hash (e.g. another
--                     library's SET NX PX string), which is never touched; fence is the counter
--                     as it is (not raised); pttl is the key's remaining ttl in ms (-1: none).
--                     Refused by readers: pttl is when the last of them expires, at most a
--                     third of ARGV[5] when registered (the waiter comes back by then to stay
--                     registered). Refused by a waiting writer: when its registration ends.
--   {0, fence, pttl, 1}  refused by readers, and the writer registered as waiting: it must
--                     leave (fair_leave.lua) if it gives up
--   {-1, fence, n}    a semaphore slot whose record says n permits, not ARGV[7]: nothing changed
-- server_ms, key_clock: key_clock.lua, put before this.
-- The name's counter, else the node's floor, else (a node that lost its memory, or a new one)
-- the server's clock in microseconds: tokens grow by one per grant, far slower than that clock,
-- so a node that restarted empty still counts from above every token handed out before, even
-- when every node lost its memory (a quiet rolling restart). Exact in a Lua number below 2^53.
local function counter()
  local known = redis.call('get', KEYS[2]) or redis.call('get', KEYS[3])
  if known then return tonumber(known) end
  local t = redis.call('time')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- A key lives at least `ms` more (never shortened: other holds share it).
local function outlive(key, ms)
  if redis.call('pttl', key) < ms then redis.call('pexpire', key, ms) end
end
-- KEYS[4]: a lease of ARGV[3] ms may live until ARGV[3] ms from now. A string there is the
-- never-shrinking record of dlock before 0.2: replaced.
local function record_ttl()
  local ttl = tonumber(ARGV[3])
  local until_ms = server_ms() + ttl
  local added = redis.pcall('zadd', KEYS[4], 'gt', until_ms, ttl)
  if type(added) ~= 'number' then
    if redis.call('type', KEYS[4]).ok ~= 'string' then error(added.err) end  -- e.g. OOM
    redis.call('del', KEYS[4])
    redis.call('zadd', KEYS[4], until_ms, ttl)
  end
  outlive(KEYS[4], ttl)
end
local function next_token()
  local token = counter() + 1
  redis.call('set', KEYS[2], token, 'px', ARGV[3])
  if token > tonumber(redis.call('get', KEYS[3]) or '0') then redis.call('set', KEYS[3], token) end
  record_ttl()
  return token
end
-- Drops readers past their expiry; returns how long the last live one has left (0: none).
local function live_readers_left(clock)
  local now = clock.now(KEYS[5])
  clock.prune(KEYS[5], now)
  local _, expiry = clock.entry(KEYS[5], true)
  if not expiry then return 0 end
  return expiry - now
end
-- A semaphore's slot: only the count recorded on this node may be granted here.
local record = KEYS[7]
if record then
  local n = redis.call('hget', record, 'n')
  if n and n ~= ARGV[7] then return {-1, counter(), tonumber(n)} end
end
-- `fresh`: the lock key was absent (then no ttl to compare with).
local function grant_write(fresh)
  redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
  if fresh then
    redis.call('pexpire', KEYS[1], ARGV[3])
  else
    outlive(KEYS[1], tonumber(ARGV[3]))
  end
  if record then
    if fresh then redis.call('hincrby', record, 'held', 1) end
    redis.call('hset', record, 'n', ARGV[7])
    outlive(record, redis.call('pttl', KEYS[1]))
  end
  if ARGV[6] == '1' then redis.call('zrem', KEYS[6], ARGV[1]) end
  return {1, next_token(), 0}
end

if ARGV[4] == 'r' then
  local clock = key_clock()
  if redis.call('exists', KEYS[1]) == 1 then
    -- Only the writer itself may read beside its write hold, and only from the client that
    -- holds it (hold ids are "CLIENT.N"): two clients naming one owner are two owners.
    -- pcall: a foreign key is held, never touched.
    local writer = redis.pcall('hget', KEYS[1], ARGV[1])
    if type(writer) ~= 'string' or
        string.match(writer, '^(.*)%.%d+$') ~= string.match(ARGV[2], '^(.*)%.%d+$') then
      return {0, counter(), redis.call('pttl', KEYS[1])}
    end
  elseif redis.call('exists', KEYS[6]) == 1 then
    local now = clock.now(KEYS[6])
    clock.prune(KEYS[6], now)
    local _, deadline = clock.entry(KEYS[6], false)
    if deadline then return {0, counter(), deadline - now} end
  end
  local ttl = tonumber(ARGV[3])
  local now = clock.now(KEYS[5])
  redis.call('zadd', KEYS[5], now + ttl, ARGV[2] .. ' ' .. ARGV[1])
  outlive(KEYS[5], ttl)
  clock.mark(KEYS[5], false, now)
  return {1, next_token(), 0}
end

-- EXISTS first: the common case (a free lock, no readers) needs nothing more.
if redis.call('exists', KEYS[1], KEYS[5]) == 0 then return grant_write(true) end
if redis.call('exists', KEYS[5]) == 1 then
  local clock = key_clock()
  local left = live_readers_left(clock)
  if left > 0 then
    local wait = tonumber(ARGV[5])
    if wait > 0 then
      local now = clock.now(KEYS[6])
      redis.call('zadd', KEYS[6], now + wait, ARGV[1])
      outlive(KEYS[6], wait)
      clock.mark(KEYS[6], false, now)
      return {0, counter(), math.min(left, math.max(1, math.floor(wait / 3))), 1}
    end
    return {0, counter(), left}
  end
  if redis.call('exists', KEYS[1]) == 0 then return grant_write(true) end
end
-- pcall: HGET on a key of another type is an error table, not a failure (a foreign lock).
local mine = redis.pcall('hget', KEYS[1], ARGV[1])
-- Hold ids are "CLIENT.N". A later hold of this client means this call ran late (its connection
-- stalled, the client gave up on it and took the lock again): taking the newer hold over would
-- let this attempt's own clean-up release free it.
local function older_hold_of_this_client(id)
  local client, n = string.match(id, '^(.*)%.(%d+)$')
  local my_client, my_n = string.match(ARGV[2], '^(.*)%.(%d+)$')
  -- <=: this very hold, met again (one server named twice, or a duplicated request), is
  -- ours as well: refusing it would make an acquisition refuse itself.
  return client ~= nil and client == my_client and tonumber(n) <= tonumber(my_n)
end
if type(mine) == 'string' and older_hold_of_this_client(mine) then return grant_write(false) end
return {0, counter(), redis.call('pttl', KEYS[1])}
