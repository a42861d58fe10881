#!/usr/bin/python3
"""Redis CPU of the role check master_only.lua puts before every script that grants, extends,
raises or releases (INFO replication read inside the script: Lua may not call ROLE).
    taskset -c 1 nice -n 5 /usr/bin/python3 bench/lean/info_cost.py [ROUNDS] [N]
Starts a private redis-server (no persistence, a free loopback port), then runs ROUNDS rounds
(default 7) of N pipelined EVALSHA calls (default 20,000) of two scripts, in alternating order:
`return 1`, and the same after master_only.lua's check. Prints the server's CPU per call (INFO
cpu, user + sys, rusage) median over the rounds for each, and the difference: what the check
costs per call. Needs python3-redis.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from redis_process import free_port, start_server  # noqa: E402

PLAIN = "return 1"
CHECKED = ("local replication = redis.pcall('info', 'replication') "
           "if type(replication) == 'string' then "
           "local role = string.match(replication, 'role:(%a+)') "
           "if role and role ~= 'master' then return redis.error_reply('READONLY') end end "
           "return 1")


def cpu(r):
    info = r.info("cpu")
    return info["used_cpu_user"] + info["used_cpu_sys"]


def per_call(r, sha, n):
    before = cpu(r)
    pipe = r.pipeline(transaction=False)
    for k in range(n):
        pipe.evalsha(sha, 0)
        if k % 1000 == 999:
            pipe.execute()
            pipe = r.pipeline(transaction=False)
    pipe.execute()
    return (cpu(r) - before) / n * 1e6


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    server, r = start_server(free_port())
    try:
        shas = {"plain": r.script_load(PLAIN), "checked": r.script_load(CHECKED)}
        cpu_us = {"plain": [], "checked": []}
        for i in range(rounds):
            order = ["plain", "checked"] if i % 2 else ["checked", "plain"]
            for name in order:
                cpu_us[name].append(per_call(r, shas[name], n))
        med = {name: statistics.median(v) for name, v in cpu_us.items()}
        print(f"server CPU per call (median of {rounds} rounds of {n}): "
              f"plain {med['plain']:.2f} us, with the role check {med['checked']:.2f} us, "
              f"the check {med['checked'] - med['plain']:.2f} us")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
