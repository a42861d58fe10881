#!/usr/bin/python3
"""What one item of a group-commit batch costs Redis, against the raw floor (issue 32).

Runs, on a private redis-server pinned to CPU 1, batches of K items of: the raw floor pipelined
(K `SET NX PX`, then K compare-and-delete scripts), dlock's acquire_batch.lua and
release_batch.lua as the client sends them (src/scripts, the unguarded texts), and stripped
scripts that show what is left when the logic is taken away: a script that only reads its
arguments and replies (the price of passing 3 keys + 4 arguments per item into Lua), one that
only writes `SET NX PX` per item, and one with acquire_batch's `EXISTS` + `SET` and nothing
else. Redis CPU is `INFO` used_cpu_user + used_cpu_sys read around each call (the INFO call's
own cost measured first and taken off), divided by K. Interleaved rounds, medians.

    taskset -c 0 /usr/bin/python3 bench/lean/batch_item_cost.py [K] [ROUNDS] [src/scripts]

The absolute numbers include the server's socket reads of a request built by Python (more per
argument than dlock's client causes): compare rows of one run only.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from redis_process import free_port, start_server  # noqa: E402

K = int(sys.argv[1]) if len(sys.argv) > 1 else 50
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 200
SRC = sys.argv[3] if len(sys.argv) > 3 else "src/scripts"


def source(name):
    with open(os.path.join(SRC, name + ".lua")) as f:
        return f.read()


# As script.cc sends them on a connection whose server refuses writes as a replica: the shebang
# (allow-oom for the release) in place of master_only.lua; acquire_batch with key_clock.lua's
# functions before it.
ACQUIRE_BATCH = "#!lua\n" + source("key_clock") + source("acquire_batch")
RELEASE_BATCH = "#!lua flags=allow-oom\n" + source("release_batch")
COMPARE_AND_DELETE = ("if redis.call('get', KEYS[1]) == ARGV[1] then "
                      "return redis.call('del', KEYS[1]) else return 0 end")
# acquire_batch's layout (2 node keys, then 3 keys and 4 arguments per item), less and less done.
ARGS_ONLY = """#!lua
local out = {}
for i = 1, (#KEYS - 2) / 3 do out[i] = i end
return out"""
SET_ONLY = """#!lua
local out = {}
for i = 1, (#KEYS - 2) / 3 do
  out[i] = redis.call('set', KEYS[3 * i], ARGV[4 * i - 2], 'nx', 'px', ARGV[4 * i - 1]) and i or false
end
return out"""
EXISTS_SET = """#!lua
local out = {}
for i = 1, (#KEYS - 2) / 3 do
  if redis.call('exists', KEYS[3 * i + 2], KEYS[3 * i + 1]) == 0 and redis.call('set', KEYS[3 * i],
      'dlock. ' .. ARGV[4 * i - 2] .. ' ' .. ARGV[4 * i - 3], 'nx', 'px', ARGV[4 * i - 1]) then
    out[i] = i
  else
    out[i] = false
  end
end
return out"""


def main():
    server, r = start_server(free_port(), cpu="1")
    try:
        run(r)
    finally:
        server.kill()


def run(r):
    def cpu():
        info = r.info("cpu")
        return info["used_cpu_user"] + info["used_cpu_sys"]

    start = cpu()
    for _ in range(100):
        cpu()
    info_cost = (cpu() - start) / 101
    sha = {text: r.script_load(text) for text in
           (ACQUIRE_BATCH, RELEASE_BATCH, COMPARE_AND_DELETE, ARGS_ONLY, SET_ONLY, EXISTS_SET)}

    def items(round_):
        return [("job:%d:%d" % (round_, i), "%032x" % (round_ * K + i), "cl.%d" % i)
                for i in range(K)]

    def acquire_layout(round_):
        keys, args = ["dlock:fence-floor", "dlock:max-ttl"], []
        for name, owner, hold in items(round_):
            keys += [name, "dlock:fence:{%s}" % name, "dlock:readers:{%s}" % name]
            args += [owner, hold, "30000", "n"]
        return keys, args

    def timed(call):
        before = cpu()
        reply = call()
        return (cpu() - before - info_cost) / K * 1e6, reply

    def batch(text, round_):
        keys, args = acquire_layout(round_)
        return timed(lambda: r.evalsha(sha[text], len(keys), *keys, *args))

    def release(round_):
        batch(ACQUIRE_BATCH, round_)
        keys, args = [], []
        for name, owner, hold in items(round_):
            keys.append(name)
            args += [owner, hold]
        return timed(lambda: r.evalsha(sha[RELEASE_BATCH], len(keys), *keys, *args))

    def raw(round_):
        pipe = r.pipeline(transaction=False)
        for name, owner, _ in items(round_):
            pipe.set(name, owner, nx=True, px=30000)
        acquire, _ = timed(pipe.execute)
        pipe = r.pipeline(transaction=False)
        for name, owner, _ in items(round_):
            pipe.evalsha(sha[COMPARE_AND_DELETE], 1, name, owner)
        release_, _ = timed(pipe.execute)
        return acquire, release_

    rows = {k: [] for k in ("raw SET NX PX", "raw compare-and-delete", "raw cycle",
                            "acquire_batch.lua", "release_batch.lua", "dlock cycle",
                            "stripped: arguments only", "stripped: SET NX PX only",
                            "stripped: EXISTS + SET NX PX")}
    for round_ in range(ROUNDS):
        a, d = raw(round_)
        r.flushall()
        rows["raw SET NX PX"].append(a)
        rows["raw compare-and-delete"].append(d)
        rows["raw cycle"].append(a + d)
        a, reply = batch(ACQUIRE_BATCH, round_)
        assert all(reply), reply[:3]
        r.flushall()
        d, reply = release(round_)
        assert reply == [0] * K, reply[:3]
        r.flushall()
        rows["acquire_batch.lua"].append(a)
        rows["release_batch.lua"].append(d)
        rows["dlock cycle"].append(a + d)
        for label, text in (("stripped: arguments only", ARGS_ONLY),
                            ("stripped: SET NX PX only", SET_ONLY),
                            ("stripped: EXISTS + SET NX PX", EXISTS_SET)):
            rows[label].append(batch(text, round_)[0])
            r.flushall()
    floor = statistics.median(rows["raw cycle"])
    print("K = %d items per call, %d rounds; Redis CPU per item, µs (median)" % (K, ROUNDS))
    for label, values in rows.items():
        print("%-30s %6.2f   %.2f× the raw cycle" % (label, statistics.median(values),
                                                     statistics.median(values) / floor))


if __name__ == "__main__":
    main()
