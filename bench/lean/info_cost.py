#!/usr/bin/python3
"""Redis CPU of the role check master_only.lua puts before every script that grants, extends,
raises or releases (INFO replication read inside the script: Lua may not call ROLE), and of the
unguarded texts sent instead where replicas refuse writes by themselves (Redis 7's shebang, no
check: src/scripts/script.cc).
    taskset -c 1 nice -n 5 /usr/bin/python3 bench/lean/info_cost.py [ROUNDS] [N]
Starts a private redis-server (no persistence, a free loopback port), then runs ROUNDS rounds
(default 7) of N pipelined EVALSHA calls (default 20,000) of each variant below, their order
turned round each round. Prints the server's CPU per call (INFO cpu, user + sys, rusage), the
median over the rounds for each, and the differences:
  plain      `return 1`
  checked    master_only.lua, then `return 1`
  shebang    `#!lua` then `return 1` (what acquire.lua and fair_acquire.lua get)
  allow-oom  `#!lua flags=allow-oom` then `return 1` (release, renew, fence_raise, ...)
and per lock cycle (acquire.lua then release.lua of a new name each call, as src/scripts/script.cc
builds their texts; one node's counter):
  cycle guarded    master_only.lua + key_clock.lua + the script (the check sent)
  cycle unguarded  the shebang + key_clock.lua + the script (the check skipped)
Needs python3-redis.
"""
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from redis_process import free_port, start_server  # noqa: E402

SRC = os.path.join(HERE, "..", "..", "src", "scripts")


def source(name):
    with open(os.path.join(SRC, name + ".lua")) as f:
        return f.read()


MASTER_ONLY = source("master_only")
KEY_CLOCK = source("key_clock")
SHEBANG = "#!lua\n"
SHEBANG_ALLOW_OOM = "#!lua flags=allow-oom\n"
CALLS = {
    "plain": "return 1",
    "checked": MASTER_ONLY + "return 1",
    "shebang": SHEBANG + "return 1",
    "allow-oom": SHEBANG_ALLOW_OOM + "return 1",
}
CYCLES = {
    "cycle guarded": (MASTER_ONLY + KEY_CLOCK + source("acquire"),
                      MASTER_ONLY + KEY_CLOCK + source("release")),
    "cycle unguarded": (SHEBANG + KEY_CLOCK + source("acquire"),
                        SHEBANG_ALLOW_OOM + KEY_CLOCK + source("release")),
}


def cpu(r):
    info = r.info("cpu")
    return info["used_cpu_user"] + info["used_cpu_sys"]


def acquire(sha, name):
    return ["EVALSHA", sha, 6, name, "dlock:fence:{%s}" % name, "dlock:fence-floor",
            "dlock:max-ttl", "dlock:readers:{%s}" % name, "dlock:writers-waiting:{%s}" % name,
            "owner", "c.1", "30000", "w", "0", "0", "n"]


def release(sha, name):
    return ["EVALSHA", sha, 4, name, "dlock:queue:{%s}" % name, "dlock:queue-alive:{%s}" % name,
            "dlock:readers:{%s}" % name, "owner", "dlock:release:{%s}" % name, "c.1", "w",
            "publish"]


def per_call(r, commands, n):
    """Server CPU µs per item of `commands(k)` (a list of commands), over n items."""
    before = cpu(r)
    pipe = r.pipeline(transaction=False)
    for k in range(n):
        for command in commands(k):
            pipe.execute_command(*command)
        if k % 500 == 499:
            for reply in pipe.execute(raise_on_error=False):
                if isinstance(reply, Exception):
                    raise reply
            pipe = r.pipeline(transaction=False)
    pipe.execute()
    return (cpu(r) - before) / n * 1e6


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    server, r = start_server(free_port())
    try:
        work = {}
        for name, text in CALLS.items():
            sha = r.script_load(text)
            work[name] = lambda k, sha=sha: [["EVALSHA", sha, 0]]
        for name, (acq, rel) in CYCLES.items():
            a, b = r.script_load(acq), r.script_load(rel)
            # A new name per cycle and round: every acquisition is a grant, every release frees.
            work[name] = lambda k, a=a, b=b, tag=name: [acquire(a, "%s:%d" % (tag, k)),
                                                        release(b, "%s:%d" % (tag, k))]
        cpu_us = {name: [] for name in work}
        order = list(work)
        for i in range(rounds):
            for name in (order if i % 2 else reversed(order)):
                r.flushall()
                cpu_us[name].append(per_call(r, work[name], n))
        med = {name: statistics.median(v) for name, v in cpu_us.items()}
        print(f"server CPU per call, median of {rounds} rounds of {n}:")
        for name, v in med.items():
            print(f"  {name:16s} {v:6.2f} us   (rounds: " +
                  " ".join(f"{x:.2f}" for x in cpu_us[name]) + ")")
        print(f"  the check:               {med['checked'] - med['plain']:+.2f} us per call")
        print(f"  the shebang:             {med['shebang'] - med['plain']:+.2f} us per call")
        print(f"  the shebang, allow-oom:  {med['allow-oom'] - med['plain']:+.2f} us per call")
        print(f"  a cycle without check:   "
              f"{med['cycle unguarded'] - med['cycle guarded']:+.2f} us per cycle")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
