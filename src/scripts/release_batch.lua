-- release_batch: group commit (docs/protocol.md, "Group commit"): K releases of write holds on
-- one node in one call, each with an outcome of its own. Per name it runs only release.lua's
-- path for a write hold by hold id whose waiter flag is '.' (nobody waits: nothing to read in
-- the queue, nothing to publish), or nothing at all.
--
-- KEYS[i]  for the i-th name (i = 1..K): the lock key NAME (the string
--          "dlock" F " " HOLD_ID " " OWNER, acquire.lua; release.lua KEYS[1])
-- ARGV[2i - 1], ARGV[2i]  the i-th owner token and hold id (never ''): release.lua's ARGV[1]
--          and ARGV[3]
-- Only what the path reads: each argument costs Redis about as much per item as the Lua that
-- uses it (a string made for the call, and one in Lua's table); this script was a fifth
-- cheaper per item once the queue key, the channel and the PUBLISH verb, which it never read,
-- were left out (docs/protocol-lean.md).
--
-- Replies an array of K elements, the i-th for the i-th name:
--   0      freed: the key deleted; nothing published (nobody waits), as release.lua replies
--   -1     this hold is not here (expired, taken by another, a foreign key): unchanged
--   nil    nothing was changed: the hold is flagged '!' (somebody waits), or the key is an older
--          dlock's hash; the client sends this name alone to release.lua, which publishes
local out = {}
for i = 1, #KEYS do
  -- pcall: GET of a hash (an older dlock's) is an error table, not a failure.
  local value = redis.pcall('get', KEYS[i])
  if type(value) == 'string' then
    -- Compared whole (the hold id has no space, the owner is not empty), not parsed: a pattern
    -- match costs more Lua than the one string it spares.
    local hold = ' ' .. ARGV[2 * i] .. ' ' .. ARGV[2 * i - 1]
    if value == 'dlock.' .. hold then
      redis.call('del', KEYS[i])
      out[i] = 0
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
