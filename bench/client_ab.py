#!/usr/bin/python3
"""Two builds of dlock_bench against each other at one call in flight, with the client's own CPU:
what bench/compare.sh does not report (its clients and servers are on different CPUs).

    /usr/bin/python3 bench/client_ab.py OLD/dlock_bench NEW/dlock_bench [ROUNDS] [CYCLES] [K]

Starts a private redis-server on CPU 0 (no persistence), and per round runs `dlock_bench cycles
--impl dlock --count CYCLES` (the blocking API) and the same with `--async` (the asio API), each
with the old and the new binary, on CPU 0 beside the server as bench/run.sh places them, the
order of the two binaries swapped every round; the raw floor (`--impl raw`) once per round for
scale. Per run: the wall time, the server's CPU (INFO cpu, used_cpu_user + used_cpu_sys) and the
client's (its rusage), each per cycle, over the process's whole run (start included, as in
bench/compare.sh: use enough cycles). Prints, per API and measure, the medians over the rounds
and new ÷ old as the median of the per-round ratios, with how many rounds the new one was lower
(a busy 2-core machine drifts between rounds; the ratio of two neighbouring runs is what
counts). Defaults: 10 rounds of 20,000 cycles. With K: a third row, the asio API with K cycles
in flight (`--async --inflight K`: one thread, 3 s a run, per cycle over the cycles it ran, as
bench/run.sh's "Many in flight" places it). Needs python3-redis.
"""
import resource
import statistics
import subprocess
import sys
import time

from redis_process import free_port, start_server


def server_cpu(r):
    info = r.info("cpu")
    return info["used_cpu_user"] + info["used_cpu_sys"]


def run(r, binary, port, args, cycles):
    """(wall, server CPU, client CPU) in µs per cycle of one run; with --inflight, per cycle it
    ran (it prints "... per second, N cycles")."""
    cpu0 = server_cpu(r)
    use0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    out = subprocess.run(["taskset", "-c", "0", binary, "cycles", "--port", str(port), "--count",
                          str(cycles)] + args, check=True, stdout=subprocess.PIPE, text=True).stdout
    t1 = time.monotonic()
    if "--inflight" in args:
        cycles = int(out.split()[-2])
    use1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu1 = server_cpu(r)
    client = (use1.ru_utime - use0.ru_utime) + (use1.ru_stime - use0.ru_stime)
    return ((t1 - t0) * 1e6 / cycles, (cpu1 - cpu0) * 1e6 / cycles, client * 1e6 / cycles)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    old, new = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    cycles = int(sys.argv[4]) if len(sys.argv) > 4 else 20000
    apis = [("blocking", ["--impl", "dlock"]), ("asio", ["--impl", "dlock", "--async"])]
    if len(sys.argv) > 5:
        apis.append((f"asio {sys.argv[5]}", ["--impl", "dlock", "--async", "--inflight",
                                             sys.argv[5]]))
    port = free_port()
    server, r = start_server(port, cpu="0")
    try:
        raw = []
        for api, args in apis:
            runs = {"old": [], "new": []}
            for i in range(rounds):
                order = [("old", old), ("new", new)]
                for which, binary in (order if i % 2 == 0 else order[::-1]):
                    runs[which].append(run(r, binary, port, args, cycles))
                if api == "blocking":
                    raw.append(run(r, old, port, ["--impl", "raw"], cycles))
            for k, what in enumerate(("wall", "Redis CPU", "client CPU")):
                a = [x[k] for x in runs["old"]]
                b = [x[k] for x in runs["new"]]
                ratios = [y / x for x, y in zip(a, b)]
                print(f"{api:8s} {what:10s}: old {statistics.median(a):7.2f}  new "
                      f"{statistics.median(b):7.2f} µs per cycle, new ÷ old "
                      f"{statistics.median(ratios):.3f} (new lower in "
                      f"{sum(x < 1 for x in ratios)} of {len(ratios)})")
        print(f"raw floor: wall {statistics.median(x[0] for x in raw):.2f}, Redis CPU "
              f"{statistics.median(x[1] for x in raw):.2f}, client CPU "
              f"{statistics.median(x[2] for x in raw):.2f} µs per cycle")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
