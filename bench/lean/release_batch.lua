-- PROTOTYPE (issue 32, docs/protocol-lean.md): the exclusive releases of K names in one call,
-- each with its own outcome. Not used by the library; measured by bench/lean_cost.py.
--
-- KEYS[2i - 1], KEYS[2i]  the i-th lock key NAME and its fair queue dlock:queue:{NAME}
-- ARGV[1]  'publish' or 'spublish'
-- ARGV[2]  'flag': waiters mark the lock hash (proposal, docs/protocol-lean.md "Waiter flag"): a
--          refused acquisition that will wait writes the field '' of NAME (owners are never
--          empty) in the same script that refuses it; a release reads it with the hold
--          (HMGET) and walks the queue and publishes only when it is set. '': publish always
-- ARGV[3i], ARGV[3i + 1], ARGV[3i + 2]  the i-th owner, hold id, release channel
--
-- Replies {o_1, ..., o_K}: o_i >= 0 freed, PUBLISH's count; -1 not held here (unchanged);
-- -2 freed, and a fair queue exists: the client sends release_lean's queue walk for that name
-- (the production script would walk it here, with the key clock).
local out = {}
for i = 1, #KEYS / 2 do
  local key, owner, hold = KEYS[2 * i - 1], ARGV[3 * i], ARGV[3 * i + 1]
  local id, waiters = nil, true
  if ARGV[2] == 'flag' then
    local got = redis.pcall('hmget', key, owner, '')
    if type(got) == 'table' and not got.err then id, waiters = got[1], got[2] end
  else
    id = redis.pcall('hget', key, owner)
  end
  if type(id) ~= 'string' or (hold ~= '' and id ~= hold) then
    out[i] = -1
  elseif not waiters then
    redis.call('del', key)
    out[i] = 0
  else
    redis.call('del', key)
    if redis.call('exists', KEYS[2 * i]) == 1 then
      out[i] = -2
    else
      out[i] = redis.call(ARGV[1], ARGV[3 * i + 2], '~' .. owner)
    end
  end
end
return out
