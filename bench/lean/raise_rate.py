#!/usr/bin/python3
"""How often the fencing token of an N-node lock set is NOT on a quorum of the granting nodes
(the synchronous raise round), measured on real redis-servers with today's scripts
(src/scripts), for the node counter (acquire.lua ARGV[7] 'n') and the name's counter ('').
It replaces, for these settings, the model of bench/lean/raise_model.py (docs/protocol-lean.md,
"What the raise costs", open question 2).

    nice -n 10 /usr/bin/python3 bench/lean/raise_rate.py [--rounds=3] [--seconds=1.5]
        [--nodes=3,5] [--clients=1,2,4,8] [--rates=1000,5000,max] [--naming=new,fixed]
        [--raise-to=all|below]

Starts one set of N redis-servers per N (bench/redis_process.py: no persistence), loads the
scripts as bench/lean_cost.py does (key_clock.lua before the clocked ones), then per round runs
every phase (N, C, rate, naming, counter) once, in a new shuffled order; the two counters of
one (N, C, rate, naming) run back to back (in a random order), on the same servers. A phase is
C client processes for --seconds, each with one connection per node, locking names no other
client uses (uncontended):

  new    a new name per cycle
  fixed  4 names per client, taken in turn again and again (the first take of each name in a
         phase is not counted in the shares: its name counter, if any, starts there)

Each cycle, as src/lock/quorum_lock.cc does: acquire.lua sent to every node before any reply
is read; the token computed as tally_acquire (src/lock/tally.cc) does: the largest granted
counter, or a refusing node's counter + 1; `token_on_quorum`: a quorum (N/2 + 1) of granting
nodes answered exactly the token. Not on a quorum: a synchronous raise round (fence_raise.lua,
one more round trip) whose confirmations (granting nodes answering >= the token) must reach a
quorum, then the release. On a quorum but some granting node below the token
(`granted_below`): the async raise_behind, here sent on each connection just before the
release (no extra round trip, as the client does not wait for it). The raise goes to every node
(--raise-to=all, as raise_fence and raise_behind do: a ScriptRound over the node set), or only
to the granting nodes below the token (--raise-to=below). Then release.lua on every node.

Rates: the total target (locks/s over all clients), each client paced open-loop with Poisson
arrivals (an arrival that is due runs at once; a client behind schedule runs back to back);
`max`: no pacing.

Per phase: achieved locks/s, the share of acquisitions not on a quorum (the synchronous
raise), the share with granted_below (an async raise; the not-on-quorum ones are not counted
again), Redis CPU per cycle (INFO cpu used_cpu_user + used_cpu_sys, summed over the phase's
nodes, raises included, ÷ cycles), and the acquisition's median and p99 latency as a client
sees it (acquire round, and the raise round when there is one). Printed: the median over the
rounds of each, then every round. Needs python3-redis.
"""
import multiprocessing
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import redis  # noqa: E402

import lean_cost  # noqa: E402  (only --options on the command line: it reads positional ones)
from redis_process import free_port, start_server  # noqa: E402

SRC = lean_cost.SRC
FLOOR = lean_cost.FLOOR
TTL = lean_cost.TTL
FIXED_NAMES = 4


def option(name, default):
    for a in sys.argv[1:]:
        if a.startswith("--" + name + "="):
            return a.split("=", 1)[1]
    return default


def check_options():
    known = ("rounds", "seconds", "nodes", "clients", "rates", "naming", "raise-to")
    for a in sys.argv[1:]:
        if not a.startswith("--") or a[2:].split("=", 1)[0] not in known:
            sys.exit(f"unknown argument {a}: see the header of {sys.argv[0]}")


def load(r):
    """acquire and release as lean_cost.py loads them (with key_clock.lua), and fence_raise."""
    sha = lean_cost.load(r)
    sha["fence_raise"] = r.script_load(open(os.path.join(SRC, "fence_raise.lua")).read())
    return sha


def raise_call(sha, name, hold, token):
    """fence_raise.lua as src/lock/calls.cc fence_raise_call builds it (a write hold)."""
    return ["EVALSHA", sha["fence_raise"], 3, "dlock:fence:{%s}" % name, FLOOR, name,
            str(token), TTL, "owner", hold, "w"]


def tally(replies, quorum):
    """src/lock/tally.cc tally_acquire, every node voting: (token, granted, granted_below,
    token_on_quorum, the granting nodes' counters by node (None: not granted))."""
    token, counters = 0, []
    for reply in replies:
        if isinstance(reply, int) and reply > 0:  # a grant is the bare token
            token = max(token, reply)
            counters.append(reply)
        else:
            counters.append(None)
            if isinstance(reply, list) and len(reply) >= 3 and reply[0] == 0:  # held
                token = max(token, reply[1] + 1)
            elif isinstance(reply, list) and len(reply) >= 3 and reply[0] == 1:  # fair grant
                token = max(token, reply[1])
                counters[-1] = reply[1]
    granted = sum(1 for c in counters if c is not None)
    below = any(c is not None and c < token for c in counters)
    holding = sum(1 for c in counters if c == token)
    return token, granted, below, holding >= quorum, counters


def send_all(conns, per_node):
    """Every node's commands written before any reply is read; the replies, per node."""
    for conn, commands in zip(conns, per_node):
        if commands:
            conn.send_packed_command(conn.pack_commands(commands))
    return [[conn.read_response() for _ in commands] for conn, commands in zip(conns, per_node)]


class Phase:
    def __init__(self, nodes, clients, rate, naming, counter, seconds, raise_to, tag):
        self.nodes, self.clients, self.rate, self.naming = nodes, clients, rate, naming
        self.counter, self.seconds, self.raise_to, self.tag = counter, seconds, raise_to, tag


def worker(k, phase, ports, sha, barrier, results):
    """Client k of `phase`: lock cycles until the phase's time is up; puts its counts."""
    n = len(ports)
    quorum = n // 2 + 1
    calls = lean_cost.Calls(sha)
    conns = [redis.Connection(port=p) for p in ports]
    for c in conns:
        c.connect()
    rng = random.Random(f"{phase.tag}:{k}")
    per_client = None if phase.rate is None else phase.rate / phase.clients
    counts = dict(cycles=0, counted=0, not_on_quorum=0, granted_below=0, refused=0,
                  fence_failed=0, raise_calls=0)
    latencies = []
    barrier.wait()  # connected: the parent reads the servers' CPU
    barrier.wait()  # go
    start = time.monotonic()
    end = start + phase.seconds
    due = start
    i = 0
    while True:
        if per_client is not None:
            due += rng.expovariate(per_client)
            wait = due - time.monotonic()
            if wait > 0:
                if due >= end:
                    break
                time.sleep(wait)
        now = time.monotonic()
        if now >= end:
            break
        i += 1
        if phase.naming == "new":
            name, counted = f"{phase.tag}:{k}:{i}", True
        else:
            name, counted = f"{phase.tag}:{k}:f{i % FIXED_NAMES}", i > FIXED_NAMES
        hold = f"{phase.tag}-{k}.{i}"
        acquire, release = calls.current(name, hold=hold, counter=phase.counter)
        replies = [r[0] for r in send_all(conns, [[acquire]] * n)]
        token, granted, below, on_quorum, counters = tally(replies, quorum)
        ok = granted >= quorum
        sync_raise = ok and not on_quorum
        after = [[] for _ in range(n)]  # sent with the release
        if ok and (not on_quorum or below):
            targets = [j for j in range(n) if phase.raise_to == "all" or
                       (counters[j] is not None and counters[j] < token)]
            raise_cmd = raise_call(sha, name, hold, token)
            counts["raise_calls"] += len(targets)
            if not on_quorum:  # synchronous: the lease waits for a quorum of confirmations
                out = send_all(conns, [[raise_cmd] if j in targets else [] for j in range(n)])
                confirmed = sum(1 for j in range(n) if counters[j] is not None and out[j] and
                                isinstance(out[j][0], int) and out[j][0] >= token)
                if confirmed < quorum:
                    ok = False
                    counts["fence_failed"] += counted
            else:  # raise_behind: not awaited
                for j in targets:
                    after[j].append(raise_cmd)
        latencies.append(time.monotonic() - now)
        for j in range(n):
            after[j].append(release)
        send_all(conns, after)
        counts["cycles"] += 1
        if counted:
            counts["counted"] += 1
            counts["refused"] += granted < quorum
            counts["not_on_quorum"] += sync_raise
            counts["granted_below"] += granted >= quorum and on_quorum and below
    counts["seconds"] = time.monotonic() - start
    results.put((counts, latencies))
    barrier.wait()  # done: the parent reads the servers' CPU
    barrier.wait()
    for c in conns:
        c.disconnect()


def cpu_seconds(clients):
    total = 0.0
    for r in clients:
        info = r.info("cpu")
        total += info["used_cpu_user"] + info["used_cpu_sys"]
    return total


def realign(ports, sha, tag):
    """One cycle by hand before a phase: acquire, raise on every node, release, so that every
    phase starts with the nodes' counters equal (as the previous raises would leave them)."""
    conns = [redis.Connection(port=p) for p in ports]
    calls = lean_cost.Calls(sha)
    name, hold = f"{tag}:align", f"{tag}-align.1"
    acquire, release = calls.current(name, hold=hold, counter="n")
    replies = [r[0] for r in send_all(conns, [[acquire]] * len(ports))]
    token = tally(replies, len(ports) // 2 + 1)[0]
    send_all(conns, [[raise_call(sha, name, hold, token), release]] * len(ports))
    for c in conns:
        c.disconnect()


def run_phase(phase, ports, clients, sha):
    realign(ports, sha, phase.tag)
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(phase.clients + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(k, phase, ports, sha, barrier, results))
             for k in range(phase.clients)]
    for p in procs:
        p.start()
    barrier.wait()
    cpu0 = cpu_seconds(clients)
    barrier.wait()
    got = [results.get() for _ in procs]
    barrier.wait()
    cpu1 = cpu_seconds(clients)
    barrier.wait()
    for p in procs:
        p.join()
    total = {k: sum(c[k] for c, _ in got) for k in got[0][0]}
    lat = sorted(x for _, ls in got for x in ls)
    cycles, counted = total["cycles"], max(total["counted"], 1)
    return dict(
        rate=cycles / max(c["seconds"] for c, _ in got),
        noq=100.0 * total["not_on_quorum"] / counted,
        below=100.0 * total["granted_below"] / counted,
        cpu=(cpu1 - cpu0) * 1e6 / max(cycles, 1),
        raises=total["raise_calls"] / max(cycles, 1),
        p50=1e6 * lat[len(lat) // 2] if lat else 0.0,
        p99=1e6 * lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else 0.0,
        refused=total["refused"], fence_failed=total["fence_failed"], cycles=cycles)


def main():
    check_options()
    rounds = int(option("rounds", "3"))
    seconds = float(option("seconds", "1.5"))
    node_counts = [int(x) for x in option("nodes", "3,5").split(",")]
    client_counts = [int(x) for x in option("clients", "1,2,4,8").split(",")]
    rates = [None if x == "max" else int(x) for x in option("rates", "1000,5000,max").split(",")]
    namings = option("naming", "new,fixed").split(",")
    raise_to = option("raise-to", "all")
    servers, ports, clients, sha = [], {}, {}, None
    try:
        for n in node_counts:
            ports[n], clients[n] = [], []
            for _ in range(n):
                port = free_port()
                server, r = start_server(port)
                servers.append(server)
                ports[n].append(port)
                clients[n].append(r)
                sha = load(r)  # the same text everywhere: the same sha
        keys = [(n, c, rate, naming) for n in node_counts for c in client_counts
                for rate in rates for naming in namings]
        results = {}
        started = time.monotonic()
        for rnd in range(rounds):
            order = keys[:]
            random.shuffle(order)
            for j, (n, c, rate, naming) in enumerate(order):
                counters = ["n", ""]
                random.shuffle(counters)
                for counter in counters:
                    tag = f"r{rnd}p{j}{counter or 'x'}"
                    phase = Phase(n, c, rate, naming, counter, seconds, raise_to, tag)
                    out = run_phase(phase, ports[n], clients[n], sha)
                    results.setdefault((n, c, rate, naming, counter), []).append(out)
            print(f"round {rnd + 1}/{rounds} done after {time.monotonic() - started:.0f} s",
                  file=sys.stderr, flush=True)
        report(results, keys, rounds, seconds, raise_to)
    finally:
        for s in servers:
            s.terminate()
            s.wait()


def report(results, keys, rounds, seconds, raise_to):
    print(f"{rounds} rounds of {seconds} s per phase; raise to {raise_to} nodes; medians over the "
          "rounds. noq: not on a quorum (sync raise), below: granted_below only (async raise), "
          "cpu: Redis CPU µs per cycle summed over the nodes, raises: fence_raise calls per "
          "cycle, lat: acquisition p50/p99 µs. counter n = node, name = the name's.")
    print(f"{'N':>2} {'C':>2} {'target':>6} {'naming':6} {'counter':7} {'locks/s':>8} "
          f"{'noq %':>6} {'below %':>7} {'cpu µs':>7} {'raises':>6} {'lat p50':>7} {'p99':>6} "
          f"{'n÷name cpu':>10}  refused/failed")
    med = statistics.median
    for n, c, rate, naming in keys:
        rows = {k: results[(n, c, rate, naming, k)] for k in ("n", "")}
        for counter in ("n", ""):
            res = rows[counter]
            ratio = ""
            if counter == "n":
                ratio = f"{med(a['cpu'] / b['cpu'] for a, b in zip(res, rows[''])):9.2f}×"
            print(f"{n:2d} {c:2d} {rate or 'max':>6} {naming:6} {counter or 'name':7} "
                  f"{med(x['rate'] for x in res):8.0f} {med(x['noq'] for x in res):6.2f} "
                  f"{med(x['below'] for x in res):7.2f} {med(x['cpu'] for x in res):7.2f} "
                  f"{med(x['raises'] for x in res):6.3f} {med(x['p50'] for x in res):7.0f} "
                  f"{med(x['p99'] for x in res):6.0f} {ratio:>10}  "
                  f"{sum(x['refused'] for x in res)}/{sum(x['fence_failed'] for x in res)}")
    print("pooled over every C, rate and round (the cpu column alone is too noisy per row): "
          "n÷name cpu, the per-round ratios' median [quartiles]; noq %, median over C and "
          "rate of the per-row medians:")
    for n in sorted({k[0] for k in keys}):
        for naming in sorted({k[3] for k in keys}):
            group = [k for k in keys if k[0] == n and k[3] == naming]
            ratios = sorted(a["cpu"] / b["cpu"] for k in group for a, b in
                            zip(results[k + ("n",)], results[k + ("",)]))
            q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
            noq = {c: statistics.median(med(x["noq"] for x in results[k + (c,)])
                                        for k in group if k[1] > 1) if any(k[1] > 1 for k in group)
                   else 0.0 for c in ("n", "")}
            print(f"  N={n} {naming:6s}: n÷name cpu {med(ratios):.2f}× [{q[0]:.2f}, {q[2]:.2f}] "
                  f"over {len(ratios)}; noq (C > 1) n {noq['n']:.2f}%, name {noq['']:.2f}%")
    print("every round (locks/s, noq %, below %, cpu µs):")
    for n, c, rate, naming in keys:
        for counter in ("n", ""):
            res = results[(n, c, rate, naming, counter)]
            print(f"  N={n} C={c} {rate or 'max'} {naming} {counter or 'name'}: " +
                  "  ".join(f"{x['rate']:.0f} {x['noq']:.2f} {x['below']:.2f} {x['cpu']:.2f}"
                            for x in res))


if __name__ == "__main__":
    main()
