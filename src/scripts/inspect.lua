-- inspect: reports what this node knows about one lock name (read only).
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter of this name: dlock:fence:{NAME}
-- KEYS[3]  the fair queue of this name: dlock:queue:{NAME}
-- KEYS[4]  this node's fence floor: dlock:fence-floor (the counter when the name's has expired)
--
-- Replies {kind, pttl, fence, queued, owner1, hold1, owner2, hold2, ...}:
--   kind   'free' (no key), 'dlock' (a hash owner -> count) or 'foreign' (any other type,
--          e.g. another library's SET NX string lock)
--   pttl   remaining ttl in ms (-1: no key or no expiry)
--   fence  the fencing counter, or the floor when the name has none now (0: never taken)
--   queued how many waiters are in the fair queue (dead ones included until dropped)
--   owner/hold id pairs follow for 'dlock' keys
local kind = redis.call('type', KEYS[1])['ok']
local fence = tonumber(redis.call('get', KEYS[2]) or redis.call('get', KEYS[4]) or '0')
local queued = redis.call('zcard', KEYS[3])
if kind == 'none' then
  return {'free', -1, fence, queued}
end
local reply = {kind == 'hash' and 'dlock' or 'foreign', redis.call('pttl', KEYS[1]), fence, queued}
if kind == 'hash' then
  local fields = redis.call('hgetall', KEYS[1])
  for i = 1, #fields do
    reply[#reply + 1] = fields[i]
  end
end
return reply
