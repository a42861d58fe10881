-- inspect: reports what this node knows about one lock name (read only).
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter of this name: dlock:fence:{NAME}
-- KEYS[3]  the fair queue of this name: dlock:queue:{NAME}
--
-- Replies {kind, pttl, fence, queued, owner1, count1, owner2, count2, ...}:
--   kind   'free' (no key), 'dlock' (a hash owner -> count) or 'foreign' (any other type,
--          e.g. another library's SET NX string lock)
--   pttl   remaining ttl in ms (-1: no key or no expiry)
--   fence  the fencing counter (0 when never taken)
--   queued how many waiters are in the fair queue (dead ones included until dropped)
--   owner/count pairs follow for 'dlock' keys
local kind = redis.call('type', KEYS[1])['ok']
local fence = tonumber(redis.call('get', KEYS[2]) or '0')
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
