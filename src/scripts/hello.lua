-- hello: tells a node which boot identity (INFO run_id) the client sees for every node, and
-- learns which nodes restarted since this node last heard of them. Nodes thus remember each
-- other: a node that restarted empty has forgotten its own records, but the others have not.
--
-- KEYS[1]        dlock:boot, a hash: node identity -> "run_id quarantine_until_ms"
-- KEYS[2]        dlock:max-ttl, the largest lock ttl (ms) any client announced
-- ARGV[1]        the client's largest ttl in ms
-- ARGV[3i - 1]   identity (host:port) of the i-th node the client sees
-- ARGV[3i]       its run_id now
-- ARGV[3i + 1]   its uptime in seconds now
--
-- Replies {max_ttl, quarantine_1, quarantine_2, ...}: the largest ttl in use, then for the i-th
-- node the milliseconds (by this node's clock) it must still stay out of quorums: positive if
-- this node had recorded another run_id for it, that is, it restarted less than max_ttl ago.
-- A node seen for the first time is recorded with no quarantine (a fresh cluster is usable).
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local max_ttl = math.max(tonumber(redis.call('get', KEYS[2]) or '0'), tonumber(ARGV[1]))
redis.call('set', KEYS[2], max_ttl)
local result = {max_ttl}
local i = 2
while i + 2 <= #ARGV do
  local id, run_id, uptime = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local record = redis.call('hget', KEYS[1], id)
  local left = 0
  if not record then
    redis.call('hset', KEYS[1], id, run_id .. ' 0')
  else
    local seen, until_ms = string.match(record, '^(%S+) (%d+)$')
    if seen ~= run_id then
      -- Restarted `uptime` seconds ago: keys of locks taken before may be gone until every such
      -- lock has expired, max_ttl after the restart.
      until_ms = now - uptime * 1000 + max_ttl
      redis.call('hset', KEYS[1], id, run_id .. ' ' .. until_ms)
    end
    left = math.max(0, tonumber(until_ms or '0') - now)
  end
  result[#result + 1] = left
  i = i + 3
end
return result
