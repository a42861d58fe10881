-- BOUND, for comparison only (docs/protocol-lean.md, "How far Lua can go"): the least a batched
-- Lua lock cycle can do: per name SET NX PX of "HOLD_ID OWNER" on acquire and GET + DEL on
-- release, one INCR of the node counter per call, nothing else (no readers key, no waiter flag,
-- no max-ttl record: a lock protocol with those folded into the lock key's value). Not a
-- proposal as it stands; measured by bench/lean_cost.py to show what is left of the gap.
--
-- ARGV[1]  'a' acquire, 'r' release
-- KEYS[1]  the node counter; KEYS[1 + i] the i-th NAME
-- ARGV[2]  ttl (ms); ARGV[2 + i] the i-th "HOLD_ID OWNER"
-- Replies acquire {counter, o_1, ...} (o_i 1 granted, 0 held); release {o_1, ...} (1 freed,
-- 0 not held).
local out = {}
if ARGV[1] == 'a' then
  out[1] = 0
  local granted = false
  for i = 2, #KEYS do
    if redis.call('set', KEYS[i], ARGV[1 + i], 'nx', 'px', ARGV[2]) then
      out[i] = 1
      granted = true
    else
      out[i] = 0
    end
  end
  if granted then out[1] = redis.call('incr', KEYS[1]) end
  return out
end
for i = 2, #KEYS do
  if redis.call('get', KEYS[i]) == ARGV[1 + i] then
    redis.call('del', KEYS[i])
    out[i - 1] = 1
  else
    out[i - 1] = 0
  end
end
return out
