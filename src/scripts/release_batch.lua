-- release_batch: group commit (docs/protocol.md, "Group commit"): K releases of write holds on
-- one node in one call, each with an outcome of its own. Per name it runs only release.lua's
-- path for a write hold by hold id whose waiter flag is '.' (nobody was refused by it: the
-- queue is not read, '~' and the owner are published), or nothing at all.
--
-- KEYS[i]  for the i-th name (i = 1..K): the lock key NAME (the string
--          "dlock" F " " HOLD_ID " " OWNER, acquire.lua; release.lua KEYS[1])
-- ARGV[3i - 2], ARGV[3i - 1], ARGV[3i]  the i-th owner token, release channel and hold id
--          (never ''): release.lua's ARGV[1..3], in its order
-- ARGV[#ARGV]  'publish', or 'spublish' on a Redis Cluster (release.lua ARGV[5])
-- Only what the path uses: each argument costs Redis about as much per item as the Lua that
-- reads it (the fair queue's key, which this path never reads, is not sent).
--
-- Replies an array of K elements, the i-th for the i-th name:
--   n >= 0  freed: the key deleted and '~' OWNER published on the channel, n the connections
--           that heard it (PUBLISH's count), as release.lua replies: waiters that sleep on a
--           timer hear every release, and the releasing client's hand-off grace sees them
--   -1      this hold is not here (expired, taken by another, a foreign key): unchanged
--   nil     nothing was changed: the hold is flagged '!' (somebody was refused by it and may
--           queue), or the key is an older dlock's hash; the client sends this name alone to
--           release.lua, which walks the queue
local out = {}
local publish = ARGV[#ARGV]
for i = 1, #KEYS do
  -- pcall: GET of a hash (an older dlock's) is an error table, not a failure.
  local value = redis.pcall('get', KEYS[i])
  if type(value) == 'string' then
    -- Compared whole (the hold id has no space, the owner is not empty), not parsed: a pattern
    -- match costs more Lua than the one string it spares.
    local owner = ARGV[3 * i - 2]
    local hold = ' ' .. ARGV[3 * i] .. ' ' .. owner
    if value == 'dlock.' .. hold then
      redis.call('del', KEYS[i])
      -- pcall: the hold is freed by now; a PUBLISH the ACL refuses counts nobody (release.lua).
      local told = redis.pcall(publish, ARGV[3 * i - 1], '~' .. owner)
      out[i] = type(told) == 'number' and told or 0
    elseif value == 'dlock!' .. hold then
      out[i] = false
    else
      out[i] = -1  -- another hold, or another library's string: never touched
    end
  elseif value then
    out[i] = false  -- an older dlock's hash (or another type): release.lua's
  else
    out[i] = -1
  end
end
return out
