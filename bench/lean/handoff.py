#!/usr/bin/python3
"""Redis CPU per cycle at one request in flight, by how the client's threads hand requests and
replies over (issue 32: the asio API costs Redis about 3 µs per cycle more than the blocking API).

    /usr/bin/python3 bench/lean/handoff.py BUILD_DIR/bench/dlock_handoff_probe [ROUNDS] [CYCLES]

Starts a private redis-server on CPU 0 (no persistence) and runs dlock_handoff_probe (built with
dlock_bench) in each of its modes, on CPU 0 as bench/run.sh places client and server, interleaved
(the order reversed every round); reads INFO cpu (used_cpu_user + used_cpu_sys) around each run.
Prints the medians over the rounds of the server's CPU and the wall time per cycle (a SET NX PX
and a DEL). Defaults: 7 rounds of 20,000 cycles. Needs python3-redis.
"""
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from redis_process import free_port, start_server  # noqa: E402

MODES = ("inline", "single", "onehop", "twohop")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    probe = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    cycles = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    port = free_port()
    server, r = start_server(port, cpu="0")
    cpu = {m: [] for m in MODES}
    wall = {m: [] for m in MODES}
    try:
        for i in range(rounds):
            for mode in (MODES if i % 2 == 0 else MODES[::-1]):
                info = r.info("cpu")
                c0 = info["used_cpu_user"] + info["used_cpu_sys"]
                t0 = time.monotonic()
                subprocess.run(["taskset", "-c", "0", probe, mode, str(port), str(cycles)],
                               check=True)
                t1 = time.monotonic()
                info = r.info("cpu")
                c1 = info["used_cpu_user"] + info["used_cpu_sys"]
                cpu[mode].append((c1 - c0) * 1e6 / cycles)
                wall[mode].append((t1 - t0) * 1e6 / cycles)
    finally:
        server.terminate()
        server.wait()
    print(f"{rounds} rounds of {cycles} cycles (SET NX PX + DEL), medians per cycle:")
    for mode in MODES:
        print(f"  {mode:7s} Redis CPU {statistics.median(cpu[mode]):6.2f} µs   "
              f"wall {statistics.median(wall[mode]):6.2f} µs")


if __name__ == "__main__":
    main()
