-- PROTOTYPE (issue 32, docs/protocol-lean.md): the exclusive acquire's uncontended fast path
-- with a per-node fencing counter, an integer reply and the max-ttl record written only when
-- this node may not have it. Not used by the library; measured by bench/lean_cost.py.
--
-- KEYS[1]  the lock key NAME: a hash owner -> hold id with a ttl (unchanged from acquire.lua)
-- KEYS[2]  the read holds dlock:readers:{NAME} (only tested for existence here)
-- KEYS[3]  the old per-name counter dlock:fence:{NAME}: deleted on a grant, so that a client of
--          the current protocol on the same node counts this name from the node counter
--          (KEYS[4]) again, which is above every lean token (mixed versions, plan A). '' in
--          ARGV[4] leaves it alone (plan B: a node marked lean, no old client can run here)
-- KEYS[4]  the node's fencing counter: dlock:fence-floor, the key the current protocol uses as
--          its floor; one INCR per grant (plan A). Plan B: a hash whose field 'n' is the
--          counter (HINCRBY): the type is the node-level protocol marker, an older client's GET
--          of it fails with WRONGTYPE. A node without it (it lost its memory, or is new)
--          counts from its clock in microseconds, as acquire.lua's counter() does
-- KEYS[5]  dlock:max-ttl (zset ttl -> until, as in acquire.lua/hello.lua)
-- KEYS[6]  dlock:max-ttl-ok:<ttl>: while it lives, KEYS[5] holds ARGV[3] until at least a ttl
--          after it expires (see record_ttl): a grant whose lease ends before then skips the
--          record. Written with the record, with a ttl of ARGV[3]
-- ARGV[1]  owner, ARGV[2] hold id ("CLIENT.N"), ARGV[3] ttl (ms), ARGV[4] '1' plan A, '' plan B
--
-- Replies:
--   token (integer > 0)   granted: the node counter after its INCR
--   {0, counter, pttl}    held (another owner, another hold, a foreign key); counter is the
--                         node counter as it is (not raised)
--   {-2}                  not handled by the fast path (readers, a waiting writer registration,
--                         a semaphore slot): the production script goes on with acquire.lua's
--                         slow paths; the prototype stops here
local function grant(fresh)
  redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
  if fresh then
    redis.call('pexpire', KEYS[1], ARGV[3])
  elseif redis.call('pttl', KEYS[1]) < tonumber(ARGV[3]) then
    redis.call('pexpire', KEYS[1], ARGV[3])
  end
  local token
  if ARGV[4] == '1' then
    redis.call('del', KEYS[3])
    token = redis.call('incr', KEYS[4])
  else
    token = redis.call('hincrby', KEYS[4], 'n', 1)
  end
  if token == 1 then
    -- No counter: count from the clock in microseconds (above every token handed out before,
    -- while grants per node stay below one per microsecond on average).
    local t = redis.call('time')
    token = tonumber(t[1]) * 1000000 + tonumber(t[2])
    if ARGV[4] == '1' then
      redis.call('set', KEYS[4], token)
    else
      redis.call('hset', KEYS[4], 'n', token)
    end
  end
  if redis.call('exists', KEYS[6]) == 0 then
    -- The record of this ttl until now + 2 ttl, and the marker for one ttl: every grant while
    -- the marker lives ends before the entry does (ZADD GT: an entry's end never moves back).
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local ttl = tonumber(ARGV[3])
    local added = redis.pcall('zadd', KEYS[5], 'gt', now + 2 * ttl, ttl)
    if type(added) ~= 'number' then return added end  -- an old string record, OOM: an error
    if redis.call('pttl', KEYS[5]) < 2 * ttl then redis.call('pexpire', KEYS[5], 2 * ttl) end
    redis.call('set', KEYS[6], '1', 'px', ttl)
  end
  return token
end

if redis.call('exists', KEYS[1], KEYS[2]) == 0 then return grant(true) end
if redis.call('exists', KEYS[2]) == 1 then return {-2} end
local mine = redis.pcall('hget', KEYS[1], ARGV[1])
if type(mine) == 'string' then
  local client, n = string.match(mine, '^(.*)%.(%d+)$')
  local my_client, my_n = string.match(ARGV[2], '^(.*)%.(%d+)$')
  if client ~= nil and client == my_client and tonumber(n) <= tonumber(my_n) then
    return grant(false)
  end
end
local counter
if ARGV[4] == '1' then
  counter = redis.call('get', KEYS[4])
else
  counter = redis.call('hget', KEYS[4], 'n')
end
return {0, tonumber(counter or '0'), redis.call('pttl', KEYS[1])}
