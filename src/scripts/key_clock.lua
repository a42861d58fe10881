-- key_clock: not a script of its own. script.cc puts it before the scripts that keep deadlines
-- inside a key (acquire, fair_acquire, release, renew, inspect, fair_leave), or at their line
-- "-- key_clock.lua goes here (script.cc)" after a fast path that needs none of it: read holds
-- (dlock:readers:{NAME}), waiting writers (dlock:writers-waiting:{NAME}) and the fair queue's
-- check-in deadlines (dlock:queue-alive:{NAME}). No KEYS, ARGV or reply of its own.
--
-- Why a key's own clock: a deadline written as an absolute time of the server's clock goes
-- wrong when its key moves to a master whose clock disagrees (a Redis Cluster slot moved with
-- MIGRATE, as `redis-cli --cluster reshard` does, keeps each key's remaining ttl, not the times
-- in its scores). On a master whose clock is ahead, a live reader would count as expired and a
-- writer be let in beside it; behind, dead entries would outlive their lease.
--
-- How: the reserved member '' of the key (a zset member or a hash field; no entry is named
-- '': owners are never empty, and a read hold's member always has a space) is the anchor: the
-- time on the key's clock at which the key expires. A key's remaining ttl runs down in real
-- time on any master, and MIGRATE keeps it, so the key's clock reads anchor - PTTL wherever
-- the key is. Every write that may change the key's ttl writes the anchor again (clock_mark).
-- A key without an anchor (written by an older dlock) is on the server's clock, and its
-- first write anchors it there. One ZSCORE or HGET and one PTTL per key read: O(1).
--
-- The helpers are made by key_clock(), called only on the paths that read such a key: each
-- function defined at a script's top level is made anew on every call, and five of them cost
-- the write fast path (which never reads these keys) about 10% more Redis CPU per acquire.

local function server_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function key_clock()
  local clock = {}

  -- The key's clock now (ms); `hash`: the key is a hash, else a zset. The server's clock for a
  -- key without an anchor (absent, or written before anchors), or without a ttl: `server_now`
  -- if the script read it already (TIME once per script), else read now.
  function clock.now(key, hash, server_now)
    local anchor
    if hash then
      anchor = redis.call('hget', key, '')
    else
      anchor = redis.call('zscore', key, '')
    end
    if anchor then
      local left = redis.call('pttl', key)
      if left > 0 then return tonumber(anchor) - left end
    end
    return server_now or server_ms()
  end

  -- After a write to `key` (its ttl may have changed), `now` being the key's clock read before
  -- it: the anchor is when, on that clock, the key expires now.
  function clock.mark(key, hash, now)
    local left = redis.call('pttl', key)
    if left <= 0 then return end
    if hash then
      redis.call('hset', key, '', now + left)
    else
      redis.call('zadd', key, now + left, '')
    end
  end

  -- Drops the entries of zset `key` whose deadline is past `now` (its clock). The anchor stays
  -- (it is the key's expiry, later than now while the key lives); a key left with nothing but
  -- its anchor is deleted, so that "the key exists" keeps meaning "an entry is live or
  -- unpruned".
  function clock.prune(key, now)
    redis.call('zremrangebyscore', key, '-inf', now)
    if redis.call('zcard', key) == 1 and redis.call('zscore', key, '') then
      redis.call('del', key)
    end
  end

  -- The earliest (`last` false) or latest (`last` true) entry of zset `key` that is not the
  -- anchor: member, deadline; nil if there is none.
  function clock.entry(key, last)
    local from, to, step = 1, 3, 2
    local range
    if last then
      range = redis.call('zrange', key, -2, -1, 'withscores')
      from, to, step = #range - 1, 1, -2
    else
      range = redis.call('zrange', key, 0, 1, 'withscores')
    end
    for i = from, to, step do
      if range[i] and range[i] ~= '' then return range[i], tonumber(range[i + 1]) end
    end
    return nil
  end

  return clock
end
