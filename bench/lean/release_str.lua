-- PROTOTYPE, for comparison only (see acquire_str.lua): compare-and-delete of "HOLD_ID OWNER",
-- the queue read only when it exists, the release published.
-- KEYS[1] NAME, KEYS[2] queue; ARGV[1] owner, ARGV[2] channel, ARGV[3] hold id, ARGV[4] publish
-- Replies n >= 0 freed (subscribers), -1 not held, {-2} a queue exists.
if redis.call('get', KEYS[1]) ~= ARGV[3] .. ' ' .. ARGV[1] then return -1 end
redis.call('del', KEYS[1])
if redis.call('exists', KEYS[2]) == 1 then return {-2} end
return redis.call(ARGV[4], ARGV[2], '~' .. ARGV[1])
