-- inspect: reports what this node knows about one lock name (read only).
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter of this name: dlock:fence:{NAME}
-- KEYS[3]  the fair queue of this name: dlock:queue:{NAME}
-- KEYS[4]  this node's fence floor: dlock:fence-floor (the counter when the name's has expired)
-- KEYS[5]  the read holds: dlock:readers:{NAME}, a zset "HOLD_ID OWNER" -> expiry (ms, the
--          key's own clock: key_clock.lua)
-- KEYS[6]  writers waiting for readers: dlock:writers-waiting:{NAME}, owner -> deadline (ms,
--          the key's own clock)
--
-- Replies {kind, pttl, fence, queued, writers_waiting, holders, owner1, hold1, ...,
--          reader_owner1, reader_hold1, reader_pttl1, ...}:
--   kind     'free' (no key, no live reader), 'dlock' (a writer: the string "dlock" F " "
--            HOLD_ID " " OWNER of acquire.lua, or an older dlock's hash owner -> hold id),
--            'shared' (live readers and no writer) or 'foreign' (any other key, e.g. another
--            library's SET NX string lock)
--   pttl     the lock key's remaining ttl in ms; for 'shared', the last reader's (-1: no key or
--            no expiry)
--   fence    the fencing counter, or the floor when the name has none now (0: never taken)
--   queued   how many waiters are in the fair queue (dead ones included until dropped)
--   writers_waiting  live writers registered as waiting for the readers to leave
--   holders  how many owner/hold id pairs of the writer follow (for 'dlock': 1 for a string,
--            the hash's fields for an older dlock's)
--   then a triple for every live reader: owner, hold id, remaining ms
-- server_ms, key_clock: key_clock.lua, put before this.
local kind = redis.call('type', KEYS[1])['ok']
local writer = nil  -- a string hold's {owner, hold id}
if kind == 'string' then
  local id, owner = string.match(redis.call('get', KEYS[1]), '^dlock[.!] (%S+) (.+)$')
  if id then writer = {owner, id} end
end
-- A count at or below 10^15 counts nothing (acquire.lua's count_of()): reported as none.
local function count_of(text)
  if text and (tonumber(text) or 2e15) <= 1e15 then return nil end
  return text
end
local fence = tonumber(count_of(redis.call('get', KEYS[2])) or
    count_of(redis.call('get', KEYS[4])) or '0')
local queued = redis.call('zcard', KEYS[3])
-- The anchors ('', later than now while their key lives) are no writer and no reader.
local clock = key_clock()
local writers_now = clock.now(KEYS[6])
local writers_waiting = redis.call('zcount', KEYS[6], '(' .. writers_now, '+inf')
local writers_anchor = redis.call('zscore', KEYS[6], '')
if writers_anchor and tonumber(writers_anchor) > writers_now then
  writers_waiting = writers_waiting - 1
end
local now = clock.now(KEYS[5])
local readers = {}
local all_readers = redis.call('zrangebyscore', KEYS[5], '(' .. now, '+inf', 'withscores')
for i = 1, #all_readers, 2 do
  if all_readers[i] ~= '' then
    readers[#readers + 1] = all_readers[i]
    readers[#readers + 1] = all_readers[i + 1]
  end
end
local last_reader = -1
for i = 2, #readers, 2 do
  last_reader = math.max(last_reader, tonumber(readers[i]) - now)
end
local reply
if kind == 'none' then
  reply = {#readers > 0 and 'shared' or 'free', last_reader, fence, queued, writers_waiting, 0}
else
  reply = {(kind == 'hash' or writer) and 'dlock' or 'foreign', redis.call('pttl', KEYS[1]), fence,
           queued, writers_waiting, 0}
end
if writer then
  reply[#reply + 1] = writer[1]
  reply[#reply + 1] = writer[2]
  reply[6] = 1
elseif kind == 'hash' then
  local fields = redis.call('hgetall', KEYS[1])
  for i = 1, #fields do
    reply[#reply + 1] = fields[i]
  end
  reply[6] = #fields / 2
end
for i = 1, #readers, 2 do
  local m = readers[i]
  local sp = string.find(m, ' ', 1, true)
  reply[#reply + 1] = string.sub(m, sp + 1)
  reply[#reply + 1] = string.sub(m, 1, sp - 1)
  reply[#reply + 1] = tonumber(readers[i + 1]) - now
end
return reply
