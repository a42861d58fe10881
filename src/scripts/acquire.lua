-- acquire: takes the lock for a new hold of an owner. Reentrancy is counted by the client (one
-- hold per owner on the server), so this script never adds to an existing hold. This very hold
-- found here (the same server reached twice in one round) is granted again. An older hold
-- of the same client found here is stale (its release was lost: the client asks for a new hold
-- only when it has no live one) and is taken over by the new hold id, with a fencing token
-- raised as for any new holder. Any other hold of the same owner is held: a later hold of the
-- same client (this call is an older attempt that ran late), or another client's (two clients
-- naming one owner would otherwise both believe they hold it).
--
-- KEYS[1]  the lock key (the name the user gave): a string "dlock" F " " HOLD_ID " " OWNER with
--          a ttl (docs/protocol.md, "The lock key"). F, the waiter flag, is '.' while nobody is
--          known to wait for this hold and '!' once somebody does: a refusal by this hold sets
--          it (SETRANGE, with the refusal), so that the hold's release publishes (release.lua).
--          A hash owner -> hold id is an older dlock's hold: held, never taken over or touched.
--          Any other string (another library's SET NX PX lock) is foreign: held, never touched
-- KEYS[2]  the fencing counter of this name: dlock:fence:{NAME}, an integer that expires with
--          the lock (ttl ms after the last grant): Redis keeps nothing for unused names
-- KEYS[3]  this node's fence floor: dlock:fence-floor, the largest token it ever handed out or
--          was raised to, for any name; a counter that expired starts again from it, so the
--          tokens of a name grow across its counter's lifetimes; a node without one counts from
--          its clock in microseconds (counter() below)
-- KEYS[4]  dlock:max-ttl, the ttls (ms) of leases that may still live here (hello.lua): a zset
--          ttl -> until when (ms, this server's clock), the key as long-lived as its last entry.
--          A grant records ARGV[3], so every node that holds a key knows its ttl, also when the
--          greeting that announced it missed this node (a restart quarantine computed from it is
--          then long enough), and forgets it once no such lease can live. Every grant leaves the
--          entry of ARGV[3] reaching at least one and a half ttls past the moment the script ran
--          (it writes two ttls when the entry reaches less): the client that sees the grant may
--          then skip the check for grants that end within that reach (ARGV[7] 'r')
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
-- ARGV[6]  writes: '1' if this owner may have registered as waiting before (drop it on a
--          grant), or the attempt is a wait's after a refusal; the grant is then written
--          flagged '!': readers its registration refused, and other waiters of the name that
--          sleep behind this one (a client wakes one plain waiter per release message), wait
--          for its release
-- KEYS[7]  only for a slot of a semaphore: the semaphore's permit record, a hash
--          n -> the permit count, held -> permits granted on this node and not released yet;
--          it lives at least as long as every permit of the semaphore on this node (a grant
--          raises its ttl to the slot's, renew.lua re-arms it beside the permits, the release
--          of the last permit deletes it)
-- ARGV[7]  'n': count with the node's counter (KEYS[3], one INCR per grant of any name; the
--          client of a lock set of one node), else ('') with the name's (KEYS[2], then KEYS[3]).
--          Either way a token is larger than every token this node handed out or was raised to
--          for the name: the node counter is never below the name's (next_token). 'nr' and 'r'
--          the same, and the client knows that this node's record of a ttl at least ARGV[3]
--          reaches past any lease this call grants (node/record_window.h: an earlier grant on
--          this connection, within its reach): the fast path then leaves KEYS[4] alone (a
--          ZSCORE and a PEXPIRETIME less, about a tenth of the cycle's Redis CPU)
-- ARGV[8]  only with KEYS[7]: the permit count this client uses; a record of another count
--          refuses the grant, a grant records it
-- ARGV[9], ARGV[10]  only after the native acquisition's commands (docs/protocol.md, "The native
--          acquisition"; ARGV[8] then ''): the name's release channel and the publish verb. A
--          write refused by live readers then takes back this very hold (ARGV[2], ARGV[1]) if its
--          key holds it (the native SET wrote it) and none of the readers is of this owner and
--          client (the only reader that may join beside a write key, after another call of this
--          attempt counted it), and publishes '' on the channel, so that whoever the key refused
--          meanwhile tries again now
--
-- A write hold needs the lock key absent (or stale, below) and no live reader. A read hold
-- needs no writer (except the reader's own write hold: a writer may also read, a downgrade)
-- and, when no writer holds, no live waiting writer. Both kinds draw from one fencing counter,
-- so a writer's token is larger than the token of every reader and writer before it.
--
-- Replies (a grant, the common case, is a bare integer: a table reply costs Redis about as much
-- as two inner commands):
--   fence             acquired (the key was absent, or held by an older hold of this client):
--                     fence (> 0) is the counter after the increment; the key expires in
--                     ARGV[3] ms, or later if a stale hold had more left (a ttl is never
--                     shortened; a stale hold's waiter flag is kept)
--   {0, fence, pttl}  held: by another owner, by another hold of this owner (above; a dlock
--                     string hold that refuses is flagged '!'), by an older dlock's hash, or by
--                     a key that is no dlock lock (e.g. another library's SET NX PX string),
--                     which is never touched; fence is the counter
--                     as it is (not raised); pttl is the key's remaining ttl in ms (-1: none).
--                     Refused by readers: pttl is when the last of them expires, at most a
--                     third of ARGV[5] when registered (the waiter comes back by then to stay
--                     registered). Refused by a waiting writer: when its registration ends.
--   {0, fence, pttl, 1}  refused by readers, and the writer registered as waiting: it must
--                     leave (fair_leave.lua) if it gives up
--   {-1, fence, n}    a semaphore slot whose record says n permits, not ARGV[8]: nothing changed
-- server_ms, key_clock: key_clock.lua, put after the fast path (each function made costs a call
-- as much as an inner command).

-- The fast path, first: a write hold for a free name (no key, no readers; with the node's
-- counter, no name counter either) and no waiting-writer registration or semaphore slot to
-- undo. Most grants are this, and it runs before any of the functions below is made (a closure
-- per call costs Redis about as much as an inner command): EXISTS of the readers (and the name
-- counter), then one SET NX PX, which writes the hold only if the key is absent (of any type:
-- an older dlock's hash and a foreign string are left alone). It does what grant_write(true)
-- does and the common cases of next_token(): with the node's counter, one INCR; with the
-- name's, next_token()'s count inlined (keep them alike) when the name has a counter or the
-- node a floor. The rest (the floor could not count or was absent, the max-ttl record must be
-- written) it leaves to next_token() or record_ttl(), after the functions. Anything else (a
-- key, readers, or a name counter beside the node's) takes the paths below, which read the key
-- again.
local by_node = ARGV[7] == 'n' or ARGV[7] == 'nr'  -- count with the node's counter
local record_known = ARGV[7] == 'r' or ARGV[7] == 'nr'
local fast_granted = false  -- the fast path wrote the hold
local fast_counted = nil    -- its INCR of the node's counter
local fast_token = nil      -- the token it counted (then only the max-ttl record is left)
-- One EXISTS either way: the readers and the name counter, or the readers named twice. The SET
-- by pcall: a full server (noeviction) refuses it with OOM before it looks at the key, also
-- when the key is held; the general path then answers held (or fails with OOM for a free name,
-- at its own SET), as it would have without the fast path (ManagedOomTest).
local written = ARGV[4] == 'w' and ARGV[6] ~= '1' and not KEYS[7] and
    redis.call('exists', KEYS[5], by_node and KEYS[2] or KEYS[5]) == 0 and
    redis.pcall('set', KEYS[1], 'dlock. ' .. ARGV[2] .. ' ' .. ARGV[1], 'nx', 'px', ARGV[3])
if written and written.ok then
  fast_granted = true
  if by_node then
    -- pcall: see next_token().
    fast_counted = redis.pcall('incr', KEYS[3])
    -- A floor at or below 10^15 before the INCR is none (count_of() below).
    if type(fast_counted) == 'number' and fast_counted > 1e15 + 1 then
      fast_token = fast_counted
    end
  else
    local floor = redis.call('get', KEYS[3])
    local known = redis.call('get', KEYS[2]) or floor
    -- A count at or below 10^15 is none (count_of() below): next_token() then, also for a
    -- floor that counts nothing (written there at least from the clock).
    if known and (tonumber(known) or 0) > 1e15 and floor and (tonumber(floor) or 0) > 1e15 then
      fast_token = tonumber(known) + 1
      redis.call('set', KEYS[2], fast_token, 'px', ARGV[3])
      if fast_token > tonumber(floor or '0') then redis.call('set', KEYS[3], fast_token) end
    end
  end
  if fast_token then
    if record_known then return fast_token end
    -- record_ttl()'s test: the record of this ttl reaches half a ttl past this lease already.
    -- The lease's end is read from the key just set: PEXPIRETIME replies an integer, where
    -- TIME's table of two strings and their arithmetic cost Redis about 0.8 µs more. An error
    -- (no PEXPIRETIME before Redis 7) leaves the test to record_ttl().
    local score = redis.pcall('zscore', KEYS[4], ARGV[3])
    if type(score) == 'string' then
      local ends = redis.pcall('pexpiretime', KEYS[1])
      if type(ends) == 'number' and ends > 0 and
          tonumber(score) >= ends + math.floor(tonumber(ARGV[3]) / 2) then
        return fast_token
      end
    end
  end
end
-- key_clock.lua goes here (script.cc): after the fast path, which makes none of its functions.
-- A count read from a counter, or nil when it counts nothing: absent, or at or below 10^15. No
-- dlock writes a count so small (every count starts from the clock in microseconds, past 10^15
-- since 2001), but an INCR of an absent floor writes 1: a client that takes its token with a
-- plain INCR (docs/protocol-lean.md, "Native commands") would leave one where a flush, a DEL
-- or an eviction took the floor, and counting on from it would hand out tokens below those
-- handed out before. Such a count is read as none: counted from the clock, which only raises.
-- Text that is no number is kept (tonumber() then fails the caller, as it always did).
local function count_of(text)
  if text and (tonumber(text) or 2e15) <= 1e15 then return nil end
  return text
end
-- The server's clock in microseconds, read once per call (a token counted from it and the floor
-- written from it agree).
local clock_read = nil
local function clock_us()
  if not clock_read then
    local t = redis.call('time')
    clock_read = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return clock_read
end
-- The name's counter, else the node's floor, else (a node that lost its memory, or a new one)
-- the server's clock in microseconds: tokens grow by one per grant, far slower than that clock,
-- so a node that restarted empty still counts from above every token handed out before, even
-- when every node lost its memory (a quiet rolling restart). Exact in a Lua number below 2^53.
-- `floor`: KEYS[3] if the caller read it already.
local function counter(floor)
  local known = count_of(redis.call('get', KEYS[2])) or
      count_of(floor or redis.call('get', KEYS[3]))
  if known then return tonumber(known) end
  return clock_us()
end
-- The floor (its text `floor`, as read) follows a token above it. A floor that counts nothing
-- (count_of()) is written at least the clock: the node counted every name from there, and the
-- token of a name counted by its own counter may be below it (the review of the 10^15 rule:
-- written alone, it took every other name's next count on the node down to this name's).
local function raise_floor(floor, token)
  if not count_of(floor) then
    redis.call('set', KEYS[3], math.max(token, clock_us()))
  elseif token > tonumber(floor) then
    redis.call('set', KEYS[3], token)
  end
end
-- A key lives at least `ms` more (never shortened: other holds share it).
local function outlive(key, ms)
  if redis.call('pttl', key) < ms then redis.call('pexpire', key, ms) end
end
-- KEYS[4]: a lease of ARGV[3] ms granted now ends within ARGV[3] ms. When the record of that ttl
-- already reaches half a ttl further, nothing is written; else it is written until two ttls
-- from now, so that the grants of the next half ttl skip it: TIME and ZSCORE instead of TIME,
-- ZADD and PTTL on most grants (the fast path tests it with the key's PEXPIRETIME for TIME).
-- Either way the record reaches one and a half ttls past now: what a client that sees this
-- grant counts on for the next half ttl (ARGV[7] 'r'). A string in KEYS[4]
-- is the never-shrinking record of dlock before 0.2: replaced, its ttl kept as an entry that ends
-- after that ttl, the key as long-lived (as hello.lua converts it). A record that never expires
-- (PTTL -1) is kept so: given a ttl, it would end before its longer entries
-- (ManagedUpgradeRecordTest).
local function record_ttl()
  local now = server_ms()
  local ttl = tonumber(ARGV[3])
  -- pcall: an older dlock's string record is no zset (then recorded below).
  local score = redis.pcall('zscore', KEYS[4], ARGV[3])
  if type(score) == 'string' and tonumber(score) >= now + ttl + math.floor(ttl / 2) then return end
  local until_ms = now + 2 * ttl
  local left = redis.call('pttl', KEYS[4])
  local added = redis.pcall('zadd', KEYS[4], 'gt', until_ms, ARGV[3])
  if type(added) ~= 'number' then
    if redis.call('type', KEYS[4]).ok ~= 'string' then error(added.err) end  -- e.g. OOM
    local old = tonumber(redis.call('get', KEYS[4])) or 0
    redis.call('del', KEYS[4])
    redis.call('zadd', KEYS[4], until_ms, ARGV[3])
    left = -2  -- a new key
    if old > 0 then
      redis.call('zadd', KEYS[4], 'gt', now + old, old)
      redis.call('pexpire', KEYS[4], old)
    end
  end
  if left ~= -1 then outlive(KEYS[4], 2 * ttl) end
end
-- The name's counter: a new one counts from the floor, and the floor follows every token. The
-- node's: the floor itself, one INCR (no per-name key to create and expire; on one node a token
-- needs nothing else). The name's counter is taken away (GETDEL), so that it is never behind
-- the node's: a client of the name's counter (fair_acquire.lua, a lock set of several nodes,
-- an older dlock) counts this name from the floor again, above this token. Every script that
-- writes a name's counter raises the floor to it, so the INCR passes it; should the floor be
-- behind all the same (lost to an allkeys eviction, written by hand), the token still does.
-- `counted`: the floor's INCR if the fast path above made it already. The branch of the name's
-- counter is inlined in the fast path: keep them alike.
local function next_token(counted)
  local token
  if by_node then
    -- pcall: a floor INCR cannot count (no dlock writes one; "1.7e+15" by hand) is read as
    -- counter() reads it, and written back as an integer.
    if counted == nil then counted = redis.pcall('incr', KEYS[3]) end
    if type(counted) == 'number' then
      -- The floor before it at or below 10^15 counts nothing (count_of()).
      if counted > 1e15 + 1 then token = counted end
    else
      local floor = tonumber(count_of(redis.call('get', KEYS[3])))
      if floor then token = math.floor(floor) + 1 end
    end
    if not token then token = clock_us() + 1 end  -- no floor: from the clock, as counter()
    local named = tonumber(redis.call('getdel', KEYS[2]) or '0')
    if token <= named then token = named + 1 end
    if token ~= counted then redis.call('set', KEYS[3], token) end
  else
    local floor = redis.call('get', KEYS[3])
    token = counter(floor) + 1
    redis.call('set', KEYS[2], token, 'px', ARGV[3])
    raise_floor(floor, token)
  end
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
-- The fast path granted, and left the max-ttl record to record_ttl(), or the token's rare cases
-- and the record to next_token().
if fast_token then
  record_ttl()
  return fast_token
end
if fast_granted then return next_token(fast_counted) end
-- A semaphore's slot: only the count recorded on this node may be granted here.
local record = KEYS[7]
if record then
  local n = redis.call('hget', record, 'n')
  if n and n ~= ARGV[8] then return {-1, counter(), tonumber(n)} end
end
-- `fresh`: the lock key was absent (then no ttl to compare with); else `flag` is the waiter
-- flag of this client's stale string hold taken over, kept (its waiters still wait), and its
-- ttl is never shortened. A writer that registered as waiting, or waited, flags its hold:
-- readers its registration refused, and the waiters behind it, wait for this hold's release.
local function grant_write(fresh, flag)
  if ARGV[6] == '1' then flag = '!' end
  local value = 'dlock' .. (flag or '.') .. ' ' .. ARGV[2] .. ' ' .. ARGV[1]
  if fresh then
    redis.call('set', KEYS[1], value, 'px', ARGV[3])
  else
    local left = redis.call('pttl', KEYS[1])
    redis.call('set', KEYS[1], value, 'px', math.max(left, tonumber(ARGV[3])))
  end
  if record then
    if fresh then redis.call('hincrby', record, 'held', 1) end
    redis.call('hset', record, 'n', ARGV[8])
    outlive(record, redis.call('pttl', KEYS[1]))
  end
  if ARGV[6] == '1' then redis.call('zrem', KEYS[6], ARGV[1]) end
  return next_token()
end

-- A refusal by a dlock string hold (its waiter flag `flag`: '.' or '!'; nil for an older
-- dlock's hash or a foreign key, which are never touched) flags it: the refused waiter
-- listens on the release channel (it subscribed before this attempt, or does before its next
-- one, which then refuses it again, before it ever sleeps), so the hold's release must publish.
-- pcall: a full server (maxmemory) may refuse SETRANGE; the refusal stands, and the waiter
-- comes back at the pttl it is told, as it would without the flag.
local function refused_by(flag)
  if flag == '.' then redis.pcall('setrange', KEYS[1], 5, '!') end
  return {0, counter(), redis.call('pttl', KEYS[1])}
end

if ARGV[4] == 'r' then
  local clock = key_clock()
  -- pcall: GET of an older dlock's hash is an error table (WRONGTYPE): held.
  local value = redis.pcall('get', KEYS[1])
  if value then
    -- Only the writer itself may read beside its write hold, and only from the client that
    -- holds it (hold ids are "CLIENT.N"): two clients naming one owner are two owners. A hash
    -- (an older dlock's) or a foreign string is held, never touched.
    local flag, id, owner = nil, nil, nil
    if type(value) == 'string' then
      flag, id, owner = string.match(value, '^dlock([.!]) (%S+) (.+)$')
    end
    if owner ~= ARGV[1] or
        string.match(id, '^(.*)%.%d+$') ~= string.match(ARGV[2], '^(.*)%.%d+$') then
      return refused_by(flag)
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
  return next_token()
end

-- EXISTS first: the common case (a free lock, no readers) needs nothing more.
if redis.call('exists', KEYS[1], KEYS[5]) == 0 then return grant_write(true) end
if redis.call('exists', KEYS[5]) == 1 then
  local clock = key_clock()
  local left = live_readers_left(clock)
  if left > 0 then
    -- A writer that also reads may hold the key too: its read hold's release publishes nothing
    -- while its write hold lives, so the write hold is flagged for this writer's wake-up.
    -- After the native commands (ARGV[9]), this very hold is the native SET's: taken back.
    local value = redis.pcall('get', KEYS[1])
    local native_set = ARGV[9] and type(value) == 'string' and
        string.sub(value, 8) == ARGV[2] .. ' ' .. ARGV[1] and string.find(value, '^dlock[.!] ')
    if native_set then
      -- Not beside a reader of this owner and client (hold ids are "CLIENT.N"): the read that
      -- may join a write key of its own client (a downgrade), after another call of this
      -- attempt counted that key. Inline, not a function: a closure costs every call.
      local client = string.match(ARGV[2], '^(.*)%.%d+$')
      for _, member in ipairs(redis.call('zrange', KEYS[5], 0, -1)) do
        local id, owner = string.match(member, '^(%S+) (.+)$')
        if owner == ARGV[1] and string.match(id, '^(.*)%.%d+$') == client then
          native_set = false
        end
      end
    end
    if native_set then
      redis.call('del', KEYS[1])
      redis.pcall(ARGV[10], ARGV[9], '')
    elseif type(value) == 'string' and string.find(value, '^dlock%. %S+ .') then
      redis.pcall('setrange', KEYS[1], 5, '!')
    end
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
-- pcall: GET of a key of another type (an older dlock's hash) is an error table, not a
-- failure: held, never taken over (this version never writes a hash, so no hash is an older
-- hold of this client), never touched. A string that is no dlock hold is foreign: the same.
local value = redis.pcall('get', KEYS[1])
local flag, mine, owner = nil, nil, nil
if type(value) == 'string' then
  flag, mine, owner = string.match(value, '^dlock([.!]) (%S+) (.+)$')
end
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
if owner == ARGV[1] and older_hold_of_this_client(mine) then return grant_write(false, flag) end
return refused_by(flag)
