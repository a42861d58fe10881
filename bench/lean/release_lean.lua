-- PROTOTYPE (issue 32, docs/protocol-lean.md): the exclusive release with an integer reply and
-- the fair queue read only when one exists. Not used by the library; bench/lean_cost.py.
--
-- KEYS[1]  the lock key NAME (hash owner -> hold id)
-- KEYS[2]  the fair queue dlock:queue:{NAME}; KEYS[3] its liveness dlock:queue-alive:{NAME}
-- ARGV[1]  owner, ARGV[2] release channel, ARGV[3] hold id ('' any hold of the owner),
-- ARGV[4]  'publish' or 'spublish'
--
-- Replies n >= 0: freed, n subscribers of the release channel (PUBLISH's count); -1: this hold
-- is not here, nothing changed. {-2}: a fair queue exists: the production script goes on with
-- release.lua's queue walk (it needs the key clock); the prototype stops here.
local id = redis.pcall('hget', KEYS[1], ARGV[1])
if type(id) ~= 'string' or (ARGV[3] ~= '' and id ~= ARGV[3]) then return -1 end
redis.call('del', KEYS[1])
if redis.call('exists', KEYS[2]) == 1 then return {-2} end
return redis.call(ARGV[4], ARGV[2], '~' .. ARGV[1])
