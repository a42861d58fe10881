-- floor_raise: after a greeting that could be trusted, raises this node's fence floor to the
-- largest floor the greeting's answers reported. Every token handed out was on the floors of a
-- quorum when it was handed out, and a trusted greeting heard a quorum, so the largest floor
-- it read is at least every token handed out while at most a minority lost data. A node that
-- came back from an old snapshot (or missed grants) then counts from above those tokens
-- again, and a later loss of another node cannot take a name's token back down (issue 28).
--
-- KEYS[1]  this node's fence floor: dlock:fence-floor
-- ARGV[1]  the largest floor the greeting read (a positive integer)
--
-- A node without a floor is left alone: it counts from its clock in microseconds
-- (acquire.lua), which is above every floor already; so is one at or below 10^15, which counts
-- nothing (acquire.lua's count_of()). Replies the floor after the call (0: none).
local floor = redis.call('get', KEYS[1])
if not floor or (tonumber(floor) or 2e15) <= 1e15 then
  return 0
end
if tonumber(floor) < tonumber(ARGV[1]) then
  redis.call('set', KEYS[1], ARGV[1])
  return tonumber(ARGV[1])
end
return tonumber(floor)
