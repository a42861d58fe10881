-- PROTOTYPE (issue 32, docs/protocol-lean.md): the raise round of the per-node fencing counter.
-- Raises the node's counter to a token, and says for each named hold whether it is still here:
-- a raise counts towards a hold's token only on a node that granted that hold and still holds
-- it (the raise then happened before the hold left this node, which is what the next holder's
-- INCR here must come after). One call covers all the holds a client needs confirmed on this
-- node: the counter is per node, so the largest token raises it for all of them.
-- Not used by the library; measured by bench/lean_cost.py.
--
-- KEYS[1]      the node's fencing counter dlock:fence-floor (a string: plan A)
-- KEYS[1 + i]  the i-th hold's lock key NAME
-- ARGV[1]      the token (the largest the client needs confirmed here)
-- ARGV[2i], ARGV[2i + 1]  the i-th hold's owner and hold id
--
-- Replies {counter, h_1, ..., h_K}: the counter after the call (>= ARGV[1]); h_i = 1 the i-th
-- hold is here (its token is confirmed on this node if it is <= counter), 0 not.
local token = tonumber(ARGV[1])
local current = redis.call('get', KEYS[1])
if current then
  current = tonumber(current)
else
  -- A node without a counter counts from its clock in microseconds (acquire_lean.lua): a raise
  -- never seeds it below that.
  local t = redis.call('time')
  current = tonumber(t[1]) * 1000000 + tonumber(t[2])
  redis.call('set', KEYS[1], current)
end
if current < token then
  redis.call('set', KEYS[1], ARGV[1])
  current = token
end
local out = {current}
for i = 2, #KEYS do
  local id = redis.pcall('hget', KEYS[i], ARGV[2 * i - 2])
  out[i] = (type(id) == 'string' and id == ARGV[2 * i - 1]) and 1 or 0
end
return out
