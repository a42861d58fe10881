-- release_batch: group commit (docs/protocol.md, "Group commit"): K releases of write holds on
-- one node in one call, each with an outcome of its own. Per name it runs only release.lua's
-- path for a write hold by hold id whose waiter flag is '.' (nobody waits: nothing to read in
-- the queue, nothing to publish), or nothing at all.
--
-- KEYS[2i - 1], KEYS[2i]  for the i-th name (i = 1..K): the lock key NAME (the string
--          "dlock" F " " HOLD_ID " " OWNER, acquire.lua) and its fair queue dlock:queue:{NAME}
--          (release.lua KEYS[1], KEYS[2]; the queue is not read here any more: it stays for the
--          layout the client shares with release.lua's call)
-- ARGV[3i - 2], ARGV[3i - 1], ARGV[3i]  the i-th owner token, release channel (unused here) and
--          hold id (never ''): release.lua's ARGV[1..3], in its order, so that the client
--          selects them from that call's own arguments
-- ARGV[#ARGV]  'publish', or 'spublish' on a Redis Cluster (release.lua ARGV[5]; unused here)
--
-- Replies an array of K elements, the i-th for the i-th name:
--   0      freed: the key deleted; nothing published (nobody waits), as release.lua replies
--   -1     this hold is not here (expired, taken by another, a foreign key): unchanged
--   nil    nothing was changed: the hold is flagged '!' (somebody waits), or the key is an older
--          dlock's hash; the client sends this name alone to release.lua, which publishes
local out = {}
for i = 1, #KEYS / 2 do
  -- pcall: GET of a hash (an older dlock's) is an error table, not a failure.
  local value = redis.pcall('get', KEYS[2 * i - 1])
  if type(value) == 'string' then
    local flag, id, owner = string.match(value, '^dlock([.!]) (%S+) (.*)$')
    if owner ~= ARGV[3 * i - 2] or id ~= ARGV[3 * i] then
      out[i] = -1  -- another hold, or another library's string: never touched
    elseif flag == '!' then
      out[i] = false
    else
      redis.call('del', KEYS[2 * i - 1])
      out[i] = 0
    end
  elseif value then
    out[i] = false  -- an older dlock's hash (or another type): release.lua's
  else
    out[i] = -1
  end
end
return out
