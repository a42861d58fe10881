-- max_ttl_raise: raises a node's record of the largest lock ttl in use. A Redis Cluster node
-- sends it to the copy that its greeting reads (slot 0's: node/cluster_node.h) before it sends
-- an acquisition with a larger ttl to the lock's own slot, so that, as on a single server, the
-- node knows every ttl it granted (acquire.lua raises only the copy of the lock's slot).
--
-- KEYS[1]  the largest ttl this node knows of: dlock:max-ttl:{<tag of slot 0>}
-- ARGV[1]  a ttl in milliseconds
--
-- Replies the record after the call (never lower than ARGV[1]).
local ttl = tonumber(ARGV[1])
local current = tonumber(redis.call('get', KEYS[1]) or '0')
if current >= ttl then
  return current
end
redis.call('set', KEYS[1], ARGV[1])
return ttl
