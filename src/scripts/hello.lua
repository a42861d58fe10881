-- hello: a client greets a node, and makes it a member of the lock set when the client decided
-- it may vote. Seed 001's delayed restart, made automatic: a node that restarted may have lost
-- the keys of live locks, so it must not vote until the largest ttl in use has passed since it
-- booted. A member is a node that joined the lock set in its current boot: a node that
-- restarted empty has no membership (nor does a new node), one restarted from its AOF has that
-- of an earlier boot. The boot is read here, in the same script, from INFO: no address and no
-- second round trip is involved, so every client learns the same whatever it calls the node.
--
-- KEYS[1]  dlock:member, the run_id of the boot in which this node joined the lock set
-- KEYS[2]  dlock:max-ttl, the largest lock ttl (ms) announced to this node
-- KEYS[3]  dlock:fence-floor, the largest fencing token this node handed out (acquire.lua)
-- ARGV[1]  the client's largest ttl in ms (recorded if larger)
-- ARGV[2]  the largest fence floor the client saw on any node: a node that joins takes it, so
--          tokens keep growing when the nodes that held the latest one restart one by one
-- ARGV[3+] run_ids that may join now: this node becomes a member if its own is among them
--
-- Replies {recorded_max_ttl, state, run_id, uptime_seconds, fence_floor}: the largest ttl
-- recorded before this call, then 1 if a member (in this boot, after a join here included), 2
-- if a member of an earlier boot (restarted from persisted data), 0 if not a member; this
-- boot's run_id and uptime; its fence floor.
local info = redis.call('info', 'server')
local run_id = string.match(info, 'run_id:(%x+)')
local uptime = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
local recorded = tonumber(redis.call('get', KEYS[2]) or '0')
if tonumber(ARGV[1]) > recorded then redis.call('set', KEYS[2], ARGV[1]) end
local floor = tonumber(redis.call('get', KEYS[3]) or '0')
for i = 3, #ARGV do
  if ARGV[i] == run_id then
    redis.call('set', KEYS[1], run_id)
    if tonumber(ARGV[2]) > floor then
      floor = tonumber(ARGV[2])
      redis.call('set', KEYS[3], ARGV[2])
    end
  end
end
local member = redis.call('get', KEYS[1])
local state = 0
if member == run_id then
  state = 1
elseif member then
  state = 2
end
return {recorded, state, run_id, uptime, floor}
