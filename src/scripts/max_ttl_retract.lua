-- max_ttl_retract: takes back a client's own announcements of ttls (hello.lua, and a cluster
-- node's record before an acquisition, max_ttl_raise.lua) once nothing that relied on them is in
-- flight: after a refused attempt, so that a refused `-t 168h` does not keep a restarted node out
-- for a week. An announcement exists only so that a grant that runs late (after another client's
-- greeting read this node) has its ttl known here beforehand; once every attempt made under it
-- is decided, each lease it granted is recorded by its grants and renewals (bare ttl members),
-- and a refused attempt has no lease to protect.
--
-- KEYS[1]  dlock:max-ttl (hello.lua), a zset member -> until when
-- ARGV[i]  the digits of an announcement (one greeting of one client): every member
--          "<ttl>.<digits>" is removed. A bare ttl (a grant's or a renewal's record, or the
--          announcement of a dlock that predates retractions, shared by every client that
--          recorded it) is never removed.
--
-- Replies how many members were removed. One that is gone (expired, or the node restarted)
-- changes nothing; a retraction that runs late removes only what it names, never a newer
-- announcement of the same client (its digits differ).
local ids = {}
for _, id in ipairs(ARGV) do
  if string.find(id, '^%d+$') then ids[id] = true end
end
local removed = 0
for _, member in ipairs(redis.call('zrange', KEYS[1], 0, -1)) do
  local id = string.match(member, '^%d+%.(%d+)$')
  if id and ids[id] then removed = removed + redis.call('zrem', KEYS[1], member) end
end
return removed
