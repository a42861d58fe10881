-- max_ttl_raise: records that leases of a ttl may live here for a while (dlock:max-ttl, the
-- zset that greetings read: hello.lua). Sent with every renewal round (a renewed lease lives on
-- past the grant that recorded it), and by a Redis Cluster node to the copy that its greeting
-- reads (slot 0's: node/cluster_node.h) before an acquisition (acquire.lua records only in the
-- lock's own slot).
--
-- KEYS[1]  dlock:max-ttl (on a cluster: dlock:max-ttl:{<tag of slot 0>}), a zset
--          member -> until when (ms, this server's clock); a member is a ttl, or a client's
--          announcement of one ("ttl.<digits>", hello.lua): its ttl is its whole part
-- ARGV[1]  a ttl in milliseconds, or a client's announcement of one ("ttl.<digits>": a cluster
--          node records an acquisition under the announcement it is made under, so that its
--          client's retraction takes it back, max_ttl_retract.lua); recorded as this member
-- ARGV[2]  how long (ms) from now leases of that ttl may live
--
-- Replies the largest ttl recorded after the call (never lower than ARGV[1]).
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl, live = math.floor(tonumber(ARGV[1])), tonumber(ARGV[2])
-- Out of memory (maxmemory with noeviction), Redis refuses a script's first write if it may take
-- memory (ZADD) but not one that cannot (PEXPIRE), and no write after that. Raising an entry
-- that is already here takes no memory: the key's expiry is re-armed first (to what is left, or
-- `live` if that is less: never shortened, never stretched), so renewals of held locks keep
-- counting on a full server. A new entry is refused, as before. pcall: an older dlock's string
-- record is no zset (replaced below). A record that never expires (PTTL -1) is kept so: given
-- a ttl, it would end before its longer entries (ManagedUpgradeRecordTest); PERSIST is its
-- first write then, which takes no memory either.
local left = redis.call('pttl', KEYS[1])
if type(redis.pcall('zscore', KEYS[1], ARGV[1])) == 'string' then
  if left == -1 then
    redis.call('persist', KEYS[1])
  else
    redis.call('pexpire', KEYS[1], left < live and live or left)
  end
end
local added = redis.pcall('zadd', KEYS[1], 'gt', now + live, ARGV[1])
if type(added) ~= 'number' then
  -- Only an older dlock's string record is replaced; any other error (out of memory) stands,
  -- and deletes nothing. Its ttl stays an entry, and the new key lives as long (as hello.lua
  -- converts it).
  if redis.call('type', KEYS[1]).ok ~= 'string' then return added end
  local old = tonumber(redis.call('get', KEYS[1])) or 0
  redis.call('del', KEYS[1])
  redis.call('zadd', KEYS[1], now + live, ARGV[1])
  left = -2  -- a new key
  if old > 0 then
    redis.call('zadd', KEYS[1], 'gt', now + old, old)
    redis.call('pexpire', KEYS[1], old)
  end
end
if left ~= -1 and redis.call('pttl', KEYS[1]) < live then redis.call('pexpire', KEYS[1], live) end
local max_ttl = ttl
for _, entry in ipairs(redis.call('zrangebyscore', KEYS[1], now, '+inf')) do
  max_ttl = math.max(max_ttl, math.floor(tonumber(entry) or 0))
end
return max_ttl
