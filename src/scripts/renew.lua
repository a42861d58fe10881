-- renew: re-arms the ttl of many holds in one call (the watchdog's batch, extend(), and a
-- reentrant acquisition, which must make the key outlive its own ttl too).
--
-- KEYS[i]       the i-th hold's key: the lock key for a write hold (the string "dlock" F " "
--               HOLD_ID " " OWNER, acquire.lua: only its ttl is re-armed, never its value,
--               so that its waiter flag F survives; or an older dlock's hash owner -> hold id),
--               dlock:readers:{NAME} (a zset "HOLD_ID OWNER" -> expiry in ms, on the key's own
--               clock: key_clock.lua) for a read hold
-- ARGV[4i - 3]  the i-th hold's owner token
-- ARGV[4i - 2]  the i-th hold's id; '': whatever hold the owner has (Client::extend and
--               Client::extend_shared by owner, for a lock handed over across processes)
-- ARGV[4i - 1]  the i-th ttl in milliseconds
-- ARGV[4i]      'w' a write hold, 'r' a read hold, 'p' a semaphore's permit record
--               (acquire.lua KEYS[8]; owner and hold id empty): re-armed beside its permits
--               so that it lives as long as they do
--
-- A ttl is never shortened: reentrant leases of one hold share the key, and each was promised
-- that the key lives at least its own ttl from its last renewal. A read hold past its expiry
-- is not revived (a writer may have been told it was free).
--
-- Replies an array with one integer per key, in order:
--   1  the hold is here and the key now expires no sooner than ARGV[4i - 1] ms from now
--      (a permit record: the record is here, and re-armed so)
--   0  this hold is not here (expired, released, taken over): nothing changed
-- server_ms, key_clock: key_clock.lua, put before this.
local function outlive(key, ms)
  if redis.call('pttl', key) < ms then redis.call('pexpire', key, ms) end
end
local clock = nil  -- made only for read holds
local result = {}
for i = 1, #KEYS do
  local owner, id, ttl = ARGV[4 * i - 3], ARGV[4 * i - 2], tonumber(ARGV[4 * i - 1])
  result[i] = 0
  if ARGV[4 * i] == 'p' then
    if redis.call('exists', KEYS[i]) == 1 then
      outlive(KEYS[i], ttl)
      result[i] = 1
    end
  elseif ARGV[4 * i] == 'r' then
    -- Each key on its own clock (a batch names many names, maybe moved from other masters).
    clock = clock or key_clock()
    local now = clock.now(KEYS[i])
    local member = id .. ' ' .. owner
    if id == '' then
      -- By owner: hold ids have no space, so the owner is everything after the first one.
      for _, m in ipairs(redis.call('zrange', KEYS[i], 0, -1)) do
        local space = string.find(m, ' ', 1, true)
        if space and string.sub(m, space + 1) == owner then member = m end
      end
    end
    local expiry = tonumber(redis.call('zscore', KEYS[i], member) or '0')
    if expiry > now then
      -- The key's expiry is re-armed first (to what is left, or the ttl if that is less: never
      -- shortened, never stretched): on a full server (maxmemory, noeviction) Redis refuses a
      -- script's first write only if it may take memory, and the ZADD, which only moves an
      -- existing member, would otherwise be that first write.
      local left = redis.call('pttl', KEYS[i])
      redis.call('pexpire', KEYS[i], left < ttl and ttl or left)
      if expiry < now + ttl then redis.call('zadd', KEYS[i], now + ttl, member) end
      clock.mark(KEYS[i], false, now)
      result[i] = 1
    end
  else
    -- pcall: GET of a hash (an older dlock's hold: HGET, as that dlock renewed it) is an
    -- error table; a string that is no dlock hold is another library's, never touched.
    local value = redis.pcall('get', KEYS[i])
    local held, holder = nil, nil
    if type(value) == 'string' then
      held, holder = string.match(value, '^dlock[.!] (%S+) (.+)$')
    elseif value then
      held, holder = redis.pcall('hget', KEYS[i], owner), owner
    end
    if holder == owner and type(held) == 'string' and (held == id or id == '') then
      outlive(KEYS[i], ttl)
      result[i] = 1
    end
  end
end
return result
