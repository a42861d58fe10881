#!/usr/bin/python3
"""Two builds of dlock_bench against each other on a lock set of N nodes: what bench/client_ab.py
does on one node.

    /usr/bin/python3 bench/nodes_ab.py OLD/dlock_bench NEW/dlock_bench NODES CYCLES ROUNDS
        [one | async64 | clients=K | commands]

Starts NODES private redis-servers on CPU 0 (no persistence) and per round runs each binary
once, on CPU 0 beside them as bench/run.sh places everything, the order of the two swapped
every round:

  one        `dlock_bench cycles --impl dlock --nodes NODES --count CYCLES`: one name, one
             cycle in flight, the blocking API (the default)
  async64    the same with `--async --inflight 64` (one thread, 64 names, 3 s; CYCLES unused)
  clients=K  K such processes at once, each `--new-names` (a name no process used before per
             cycle), CYCLES each: several clients whose grants reach the nodes in their own
             orders
  commands   `one` once per binary (ROUNDS unused), the servers' statistics reset before: the
             commands each node ran per cycle (INFO commandstats; inside scripts too), and the
             microseconds they took

Per run: the wall time, the servers' CPU (INFO cpu, used_cpu_user + used_cpu_sys, summed over
the nodes) and the clients' (their rusage, summed), each per cycle, and the
cycles per second. Prints the medians over the rounds and new ÷ old as the median of the
per-round ratios, with how many rounds the new one was lower (higher for the rate). Needs
python3-redis.
"""
import resource
import socket
import statistics
import subprocess
import sys
import time

from redis_process import free_port, start_server


def ports_free(base, count):
    for port in range(base, base + count):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        finally:
            s.close()
    return True


def servers_cpu(clients):
    return sum(c.info("cpu")["used_cpu_user"] + c.info("cpu")["used_cpu_sys"] for c in clients)


def run(binary, base, nodes, cycles, mode, servers):
    """(wall µs, server CPU µs, client CPU µs, cycles/s), per cycle, of one run."""
    command = ["taskset", "-c", "0", binary, "cycles", "--impl", "dlock", "--port", str(base),
               "--nodes", str(nodes), "--count", str(cycles)]
    k = 1
    if mode == "async64":
        command += ["--async", "--inflight", "64"]
    elif mode.startswith("clients="):
        k = int(mode.split("=")[1])
        command += ["--new-names"]
    cpu0 = servers_cpu(servers)
    use0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    processes = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(k)]
    outputs = [p.communicate()[0] for p in processes]
    if any(p.returncode != 0 for p in processes):
        sys.exit("dlock_bench failed")
    t1 = time.monotonic()
    use1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu1 = servers_cpu(servers)
    done = float(outputs[0].split()[-2]) if mode == "async64" else cycles * k
    client = (use1.ru_utime - use0.ru_utime) + (use1.ru_stime - use0.ru_stime)
    rate = float(outputs[0].split()[0]) if mode == "async64" else done / (t1 - t0)
    return ((t1 - t0) * 1e6 / done, (cpu1 - cpu0) * 1e6 / done, client * 1e6 / done, rate)


def commands(binary, base, nodes, cycles, servers):
    """Prints `INFO commandstats` of one run of `one`: calls and µs per node per cycle."""
    run(binary, base, nodes, 200, "one", servers)  # scripts loaded, connections made
    for server in servers:
        server.config_resetstat()
    run(binary, base, nodes, cycles, "one", servers)
    total = {}
    for server in servers:
        for command, stats in server.info("commandstats").items():
            calls, usec = total.get(command, (0, 0))
            total[command] = (calls + stats["calls"], usec + stats["usec"])
    per = cycles * nodes
    print(f"  {binary}: per node per cycle")
    for command, (calls, usec) in sorted(total.items()):
        if calls / per >= 0.01 and not command.startswith(("cmdstat_config", "cmdstat_info")):
            print(f"    {command[len('cmdstat_'):]:12s} {calls / per:5.2f} calls {usec / per:6.2f} µs")


def main():
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    old, new = sys.argv[1], sys.argv[2]
    nodes, cycles, rounds = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    mode = sys.argv[6] if len(sys.argv) > 6 else "one"
    base = free_port()
    while not ports_free(base, nodes):
        base = free_port()
    started = [start_server(base + i, cpu="0") for i in range(nodes)]
    servers = [client for _, client in started]
    try:
        if mode == "commands":
            for binary in (old, new):
                commands(binary, base, nodes, cycles, servers)
            return
        runs = {"old": [], "new": []}
        for r in range(rounds):
            order = [("old", old), ("new", new)] if r % 2 == 0 else [("new", new), ("old", old)]
            for key, binary in order:
                runs[key].append(run(binary, base, nodes, cycles, mode, servers))
    finally:
        for process, _ in started:
            process.terminate()
    print(f"{nodes} nodes, {mode}, {rounds} rounds; µs per cycle, medians")
    for key in ("old", "new"):
        m = [statistics.median(x[j] for x in runs[key]) for j in range(4)]
        print(f"  {key}: wall {m[0]:.1f} server {m[1]:.1f} client {m[2]:.1f} cycles/s {m[3]:.0f}")
    for j, what, lower in ((0, "wall", True), (1, "server CPU", True), (3, "cycles/s", False)):
        ratios = [n[j] / o[j] for o, n in zip(runs["old"], runs["new"])]
        better = sum((x < 1) if lower else (x > 1) for x in ratios)
        print(f"  new ÷ old {what}: {statistics.median(ratios):.3f} "
              f"({'lower' if lower else 'higher'} in {better} of {rounds})")


if __name__ == "__main__":
    main()
