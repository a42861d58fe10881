-- acquire: takes the lock for a new hold of an owner. Reentrancy is counted by the client (one
-- hold per owner on the server), so this script never adds to an existing hold. An older hold
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
--          tokens of a name grow across its counter's lifetimes
-- KEYS[4]  dlock:max-ttl, the largest ttl (ms) this node knows of (hello.lua): raised to ARGV[3]
--          on a grant, so every node that holds a key knows its ttl, also when the greeting that
--          announced it missed this node (a restart quarantine computed from it is then long
--          enough)
-- ARGV[1]  owner token
-- ARGV[2]  hold id: unique per acquisition, "CLIENT.N" with N growing per client; release and
--          renew act only when it matches
-- ARGV[3]  ttl in milliseconds
--
-- Replies {status, fence, detail}:
--   {1, fence, 0}     acquired (the key was absent, or held by an older hold of this client):
--                     fence is the counter after the increment; the key expires in ARGV[3] ms,
--                     or later if a stale hold had more left (a ttl is never shortened)
--   {0, fence, pttl}  held: by another owner, by another hold of this owner (above), or by a
--                     key that is not a dlock hash (e.g. another
--                     library's SET NX PX string), which is never touched; fence is the counter
--                     as it is (not raised); pttl is the key's remaining ttl in ms (-1: none)
local function counter()
  return tonumber(redis.call('get', KEYS[2]) or redis.call('get', KEYS[3]) or '0')
end
local function next_token()
  local token = counter() + 1
  redis.call('set', KEYS[2], token, 'px', ARGV[3])
  if token > tonumber(redis.call('get', KEYS[3]) or '0') then redis.call('set', KEYS[3], token) end
  if tonumber(ARGV[3]) > tonumber(redis.call('get', KEYS[4]) or '0') then
    redis.call('set', KEYS[4], ARGV[3])
  end
  return token
end
-- EXISTS first: the common case (a free lock) needs no HGET.
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
  redis.call('pexpire', KEYS[1], ARGV[3])
  return {1, next_token(), 0}
end
-- pcall: HGET on a key of another type is an error table, not a failure (a foreign lock).
local mine = redis.pcall('hget', KEYS[1], ARGV[1])
-- Hold ids are "CLIENT.N". A later hold of this client means this call ran late (its connection
-- stalled, the client gave up on it and took the lock again): taking the newer hold over would
-- let this attempt's own clean-up release free it.
local function older_hold_of_this_client(id)
  local client, n = string.match(id, '^(.*)%.(%d+)$')
  local my_client, my_n = string.match(ARGV[2], '^(.*)%.(%d+)$')
  return client ~= nil and client == my_client and tonumber(n) < tonumber(my_n)
end
if type(mine) == 'string' and older_hold_of_this_client(mine) then
  redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[3]) then
    redis.call('pexpire', KEYS[1], ARGV[3])
  end
  return {1, next_token(), 0}
end
return {0, counter(), redis.call('pttl', KEYS[1])}
