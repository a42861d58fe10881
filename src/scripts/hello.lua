-- hello: tells a node the boot identities (INFO run_id) of the nodes a client sees, and learns
-- which of them booted while this node was already in use: a node that restarted (it may have
-- lost the keys of live locks), or one that is new to the lock set. Nothing here depends on how
-- a client spells a node's address: a run_id names one boot of one server, so every client,
-- whatever addresses it uses, is told the same. A node that restarted empty has forgotten its
-- own records, but the others have not.
--
-- Two modes. 'greet' asks; a node not in use answers without writing anything, so a greeting
-- that fails (too few answers a client may trust: lock/membership.h) leaves no node looking
-- as if it had been part of the set. 'join' makes a node that answered "not in use" a member,
-- after a greeting that succeeded: it records every boot the client named with the age that
-- greeting learned, so it reports a recent restart as the older members do.
--
-- KEYS[1]        dlock:boots, a hash: run_id -> "last_seen_ms boot_ms" (this node's clock);
--                boot_ms is 0 for a boot that was there when this node was first greeted
-- KEYS[2]        dlock:max-ttl, the ttls (ms) of leases that may still live here: a zset
--                member -> until when (ms, this node's clock). A member is a ttl ("60000",
--                recorded by grants, acquire.lua, and renewals, max_ttl_raise.lua) or one
--                client's announcement of a ttl ("60000.<digits>": the ttl, a dot and digits
--                unique to that announcement, which its client takes back with
--                max_ttl_retract.lua once nothing of it is in flight). Either way the ttl is
--                the member's whole part (tonumber, floored; a dlock before the retraction
--                reads "60000.123" as a little over 60000, never less). An entry goes when no
--                lease of its ttl can still live, so a quarantine follows the ttls in use, not
--                the largest ever used
-- KEYS[3]        dlock:fence-floor, read only: the largest fencing token this node handed out or
--                was raised to (acquire.lua). A greeting raises every floor below the largest
--                its answers report (floor_raise.lua): a node back from an old snapshot, or one
--                that missed grants, counts from above every token again (issue 28)
-- ARGV[1]        greet: the announcement (a member as above, or a bare ttl from a dlock before
--                the retraction), recorded for twice its ttl; '0': none. join: the largest ttl
--                the greeting learned, as its announcement (recorded for twice that)
-- ARGV[2]        how many nodes the client's lock set has (N)
-- ARGV[3]        'greet' or 'join'
-- ARGV[2i + 2]   run_id of the i-th node the client sees
-- ARGV[2i + 3]   greet: its uptime in seconds (not used: a boot first seen while this node is
--                in use counts as now, below); join: how many ms ago it booted as the greeting
--                learned it (-1: not while the set was in use)
--
-- This node is "in use" once it holds boot records (it joined, or was greeted in use before).
-- It vouches (flags unknown boots) only if it is in use and holds the boot records of at least
-- a quorum (N/2 + 1) of servers: then it was in use in a set this large, and with at most a
-- minority restarted it still knows the others. A node in use in another set (say, alone,
-- before these nodes were added) knows too few, and would otherwise take every new node for a
-- restarted one. The count is of every record it holds, not only of the run_ids named now: a
-- client that could identify only a bare quorum (one INFO failed) names the restarted node's
-- new boot and too few known ones, and a count of those would silence every node that
-- remembers (simulation seed 2300480, docs/simulation.md finding 8).
--
-- Replies {max_ttl, in_use, age_1, age_2, ..., floor} to 'greet': the largest ttl of a lease
-- that may still live here (the announced one included), 1 if this node is in use (0: nothing
-- was written), then for the i-th node how many ms ago (by this node's clock) it booted if it
-- booted (was first seen) while this node was in use, or -1 if not (seen when this node was
-- first greeted, or this node is not in use), then this node's fence floor (0: none). The
-- client keeps a node with an age below the largest ttl out of quorums until that ttl has
-- passed since its boot. Replies {max_ttl, 1} to 'join'.
--
-- Records not seen for a day (or twice the largest ttl, if longer) are dropped: a boot that old
-- is past any quarantine, so forgetting it cannot shorten one.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local in_use = redis.call('exists', KEYS[1]) == 1
local joining = ARGV[3] == 'join'

-- A member's ttl: its whole part ("60000" and "60000.<digits>" are both 60000).
local function ttl_of(member)
  return math.floor(tonumber(member) or 0)
end

-- The largest ttl of a lease that may still live here; records the announcement `member`
-- first, for twice its ttl ('0': none).
local function live_max_ttl(member)
  -- dlock before 0.2 kept a string here that never shrank: it becomes one entry that ends
  -- after its own ttl (a quarantine computed from it is as long as before, once more), and the
  -- key lives as long (acquire.lua's record_ttl and max_ttl_raise.lua convert it alike).
  if redis.call('type', KEYS[2]).ok == 'string' then
    local old = tonumber(redis.call('get', KEYS[2])) or 0
    redis.call('del', KEYS[2])
    if old > 0 then
      redis.call('zadd', KEYS[2], now + old, old)
      redis.call('pexpire', KEYS[2], old)
    end
  end
  -- For twice the ttl: the client announces again once one ttl has passed, so every lease it
  -- grants under this announcement ends while the entry lives, also one whose grant on some
  -- node runs late, after another client's greeting read this node. The key's ttl is read
  -- before the ZADD: -2, none yet (the ZADD makes the key, which then gets one); -1, a key
  -- that never expires, kept so (given one, it would end before its longer entries:
  -- ManagedUpgradeRecordTest).
  local record = ttl_of(member)
  if record > 0 then
    local left = redis.call('pttl', KEYS[2])
    redis.call('zadd', KEYS[2], 'gt', now + 2 * record, member)
    if left ~= -1 and left < 2 * record then redis.call('pexpire', KEYS[2], 2 * record) end
  end
  redis.call('zremrangebyscore', KEYS[2], '-inf', now)
  local largest = 0
  for _, entry in ipairs(redis.call('zrange', KEYS[2], 0, -1)) do
    largest = math.max(largest, ttl_of(entry))
  end
  return largest
end

-- This node's fence floor, 0 if it has none or one at or below 10^15 (it counts nothing:
-- acquire.lua's count_of()).
local function floor()
  local n = tonumber(redis.call('get', KEYS[3]) or '0') or 0
  if n <= 1e15 then return 0 end
  return n
end

if not in_use and not joining then
  -- Read only: a node not in use trusts nothing it would write now.
  local result = {0, 0}
  if redis.call('exists', KEYS[2]) == 1 then result[1] = live_max_ttl('0') end
  for i = 4, #ARGV - 1, 2 do result[#result + 1] = -1 end
  result[#result + 1] = floor()
  return result
end

local max_ttl = live_max_ttl(ARGV[1])
if joining then
  for i = 4, #ARGV - 1, 2 do
    local run_id, age = ARGV[i], tonumber(ARGV[i + 1])
    if not redis.call('hget', KEYS[1], run_id) then
      redis.call('hset', KEYS[1], run_id, now .. ' ' .. (age >= 0 and now - age or 0))
    end
  end
  return {max_ttl, 1}
end

-- Counted before old records are dropped: clients that stayed connected for over a day greet no
-- more, so every record may be old when a restart finally makes one greet.
local vouches = redis.call('hlen', KEYS[1]) >= math.floor(tonumber(ARGV[2]) / 2) + 1

local result = {max_ttl, 1}
for i = 4, #ARGV - 1, 2 do
  local run_id = ARGV[i]
  local record = redis.call('hget', KEYS[1], run_id)
  local boot = 0
  if record then
    boot = tonumber(string.match(record, ' (%d+)$')) or 0
  elseif vouches then
    -- First seen while this node was in use: whatever its uptime, it answers for this
    -- address only from now (another server put behind it has none of the keys the one before
    -- held), so it counts as booted now.
    boot = now
  end
  redis.call('hset', KEYS[1], run_id, now .. ' ' .. boot)
  if boot > 0 then
    -- Never below 0: a boot this node recorded "later than now" (its clock stepped back since)
    -- is one it saw, and a negative age read as -1, no restart at all: a promoted replica voted
    -- at once (ManagedClockTest.AQuarantineOutlastsTheNodesClockSteppingBack). As 0, its
    -- quarantine runs a whole max ttl from now: longer by up to the step, never shorter.
    result[#result + 1] = math.max(now - boot, 0)
  else
    result[#result + 1] = -1
  end
end
-- Old records are dropped after the run_ids named now were read (and seen again): a record that
-- only aged is a known boot, not a first sight.
local keep = math.max(2 * max_ttl, 86400000)
local all = redis.call('hgetall', KEYS[1])
for i = 1, #all, 2 do
  local seen = tonumber(string.match(all[i + 1], '^(%d+)'))
  if not seen or seen < now - keep then redis.call('hdel', KEYS[1], all[i]) end
end

result[#result + 1] = floor()
return result
