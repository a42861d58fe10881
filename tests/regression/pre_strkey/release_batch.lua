-- release_batch: group commit (docs/protocol.md, "Group commit"): K releases of write holds on
-- one node in one call, each with an outcome of its own. Per name it runs only release.lua's
-- path for a write hold by hold id with nobody queued, or nothing at all.
--
-- KEYS[2i - 1], KEYS[2i]  for the i-th name (i = 1..K): the lock key NAME and its fair queue
--          dlock:queue:{NAME} (release.lua KEYS[1], KEYS[2])
-- ARGV[3i - 2], ARGV[3i - 1], ARGV[3i]  the i-th owner token, release channel and hold id (never
--          ''): release.lua's ARGV[1..3], in its order, so that the client selects them from
--          that call's own arguments
-- ARGV[#ARGV]  'publish', or 'spublish' on a Redis Cluster (release.lua ARGV[5])
--
-- Replies an array of K elements, the i-th for the i-th name, as release.lua replies:
--   n >= 0  freed (the key deleted, '~' and the owner published); n is PUBLISH's count
--   -1      this hold is not here: unchanged
--   nil     nothing was changed (a fair queue exists): the client sends this name alone to
--           release.lua, which walks the queue
local out = {}
local publish = ARGV[#ARGV]
for i = 1, #KEYS / 2 do
  local key, owner, hold = KEYS[2 * i - 1], ARGV[3 * i - 2], ARGV[3 * i]
  -- pcall: a key of another type (another library's string) is not ours, never touched.
  local id = redis.pcall('hget', key, owner)
  if type(id) ~= 'string' or id ~= hold then
    out[i] = -1
  elseif redis.call('exists', KEYS[2 * i]) == 1 then
    out[i] = false
  else
    redis.call('del', key)
    -- pcall: as release.lua, a PUBLISH the ACL refuses must not turn the release into an error.
    local told = redis.pcall(publish, ARGV[3 * i - 1], '~' .. owner)
    if type(told) ~= 'number' then told = 0 end
    out[i] = told
  end
end
return out
