-- master_only: not a script of its own. script.cc puts it first in the scripts whose writes
-- make or keep a lock or report one freed (acquire, fair_acquire, renew, release,
-- force_release, fence_raise). No KEYS or ARGV of its own. Replies, before the script does anything:
--   error READONLY ...  this server is a replica now: nothing was read or written
--
-- Why: a client trusts a node as a master from one greeting (INFO role:master) to the next
-- (once per ttl, or 30 s). A master demoted in between (a coordinated FAILOVER, an operator's
-- REPLICAOF, a Sentinel that turned the old master into a replica) refuses a script's writes
-- only if it is a read-only replica. One set `replica-read-only no` runs them, and keeps them to
-- itself: the new master never sees them. A grant or an extension made there is a lease the
-- master does not have, a release made there leaves the lock held, and clients that kept their
-- connection to the old server (a DNS endpoint that moved; open connections stay) were told
-- otherwise (ManagedFailoverTest.AMasterDemotedWhileItAcceptsWritesNeitherGrantsNorExtends).
-- INFO, which dlock's user needs anyway (the greeting reads it), is the only way a script can
-- tell its server's role (ROLE is not allowed in scripts). pcall: an INFO refused here
-- changes nothing the greeting did not already decide.
--
-- It costs about 3 us of the server's CPU per call (bench/lean/info_cost.py). Each of these
-- scripts also has a text without it (script.cc: Redis 7's shebang, `#!lua`, in its place, with
-- `flags=allow-oom` for all but the two that grant), which a read-only replica refuses whole,
-- before it runs, also where the script would only read. A node sends that text only on a
-- connection whose server said `replica-read-only yes` (node/server_node.h).
local replication = redis.pcall('info', 'replication')
if type(replication) == 'string' then
  local role = string.match(replication, 'role:(%a+)')
  if role and role ~= 'master' then
    return redis.error_reply('READONLY a replica (role:' .. role .. '): only a master may ' ..
                             'hold locks, a replica keeps its writes to itself (a master ' ..
                             'demoted since dlock last read its role, or a replica named ' ..
                             'as a node)')
  end
end
