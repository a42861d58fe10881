-- semaphore_resize: changes a semaphore's permit count on this node (Client::resize_semaphore,
-- dlock semaphore resize). The count is recorded by the first acquisition (acquire.lua KEYS[8]);
-- a client that names another count is refused, so changing it is this explicit step.
--
-- KEYS[1]      the semaphore's permit record: a hash n -> the permit count, held -> permits
--              granted on this node and not released (acquire.lua)
-- KEYS[1 + k]  slot ARGV[1] + k - 1 of the semaphore, for k = 1 .. up to the largest count a
--              semaphore may have (Semaphore::kMaxPermits); only those below the recorded count
--              are read
-- ARGV[1]      the new permit count M
--
-- Growing is always safe: the holders are no more than the old count. Shrinking is refused
-- while a slot at M or above is held on this node: its holder would be one holder too many.
-- (A client that grants that slot on a quorum meets this node's old record, or this node
-- refuses the shrink: the two never both succeed on a node two quorums share.)
--
-- Replies {status, detail}:
--   {1, n}   the record said n permits and says ARGV[1] now (n = ARGV[1]: nothing changed)
--   {0, 0}   no record: no permit of the semaphore is held on this node; nothing to change
--   {-2, i}  slot i (at ARGV[1] or above) is held on this node: nothing changed
local n = redis.call('hget', KEYS[1], 'n')
if not n then return {0, 0} end
n = tonumber(n)
local m = tonumber(ARGV[1])
for i = m, n - 1 do
  local slot = KEYS[2 + i - m]
  if not slot or redis.call('exists', slot) == 1 then return {-2, i} end
end
redis.call('hset', KEYS[1], 'n', ARGV[1])
return {1, n}
