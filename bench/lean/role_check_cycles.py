#!/usr/bin/python3
"""Redis CPU per dlock lock cycle (try_lock + unlock through the library, one node) with the
role check sent and with it left out: two private redis-servers, one with `replica-read-only
no` (the scripts keep master_only.lua's check there) and one with Redis's default `yes` (the
scripts go without it: src/node/server_node.h), driven in turn by `dlock_bench cycles`.
    /usr/bin/python3 bench/lean/role_check_cycles.py [DLOCK_BENCH] [ROUNDS] [N] [INFLIGHT]
DLOCK_BENCH defaults to build/dev/bench/dlock_bench. The servers run on CPU 1, the client on
CPU 0. Each round runs N cycles (default 20,000) one at a time on each server, or with INFLIGHT
> 0, 3 s of the asio API with that many in flight (N is then unused), the order turned round
each round (default 7 rounds); prints the medians over the rounds of the server's CPU per cycle
(INFO cpu, user + sys: the socket work included) and of EVALSHA's time per call (INFO
commandstats: the scripts' execution only), and the INFO calls per cycle (2 with the check).
Needs python3-redis.
"""
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from redis_process import free_port, start_server  # noqa: E402


def start(port, extra):
    return start_server(port, cpu="1", extra=extra)


def cpu(r):
    info = r.info("cpu")
    return info["used_cpu_user"] + info["used_cpu_sys"]


def stat(r, name):
    return r.info("commandstats").get("cmdstat_" + name, {"calls": 0, "usec": 0})


def one_round(tool, port, r, n, inflight):
    before, evalsha, info = cpu(r), stat(r, "evalsha"), stat(r, "info")
    command = ["taskset", "-c", "0", tool, "cycles", "--impl", "dlock", "--port", str(port),
               "--count", str(n)]
    if inflight > 0:
        command += ["--inflight", str(inflight), "--async"]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    if inflight > 0:
        n = float(out.split(",")[1].split()[0])  # "X per second, Y cycles"
    after, evalsha2, info2 = cpu(r), stat(r, "evalsha"), stat(r, "info")
    return ((after - before) / n * 1e6,
            (evalsha2["usec"] - evalsha["usec"]) / max(1, evalsha2["calls"] - evalsha["calls"]),
            (info2["calls"] - info["calls"] - 2) / n)


def main():
    tool = sys.argv[1] if len(sys.argv) > 1 else "build/dev/bench/dlock_bench"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    inflight = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    servers = {}
    try:
        for name, extra in (("checked (replica-read-only no)", ["--replica-read-only", "no"]),
                            ("unchecked (replica-read-only yes)", [])):
            port = free_port()
            servers[name] = (port, *start(port, extra))
        results = {name: [] for name in servers}
        order = list(servers)
        for i in range(rounds):
            for name in (order if i % 2 else reversed(order)):
                port, _, r = servers[name]
                results[name].append(one_round(tool, port, r, n, inflight))
        what = f"3 s at {inflight} in flight" if inflight > 0 else f"{n} cycles"
        print(f"dlock cycles on one node, median of {rounds} rounds of {what}:")
        med = {}
        for name, rows in results.items():
            med[name] = [statistics.median(col) for col in zip(*rows)]
            cpu_us, evalsha_us, infos = med[name]
            print(f"  {name:34s} server CPU {cpu_us:6.2f} us/cycle   EVALSHA {evalsha_us:5.2f} "
                  f"us/call   INFO {infos:4.2f}/cycle   (CPU per round: " +
                  " ".join(f"{row[0]:.1f}" for row in rows) + ")")
        a, b = med[order[0]], med[order[1]]
        print(f"  left out, per cycle: server CPU {b[0] - a[0]:+.2f} us, "
              f"EVALSHA {2 * (b[1] - a[1]):+.2f} us")
    finally:
        for _, server, _ in servers.values():
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
