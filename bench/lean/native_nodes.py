#!/usr/bin/python3
"""Redis CPU per uncontended cycle on a lock set of N nodes: the raw floor, today's scripts as
this client sends them, and an acquisition of plain commands (docs/protocol-lean.md, "Native
commands without folding the readers"), with the servers placed as bench/run.sh places them.

    /usr/bin/python3 bench/lean/native_nodes.py [NODES] [CYCLES] [ROUNDS]

Starts NODES private redis-servers on CPU 0 (no persistence); the client (this process) runs on
CPU 1, so that only the servers share CPU 0, as in bench/run.sh's 5-node rows. One cycle at a
time, a new name per cycle: the acquisition goes to every node, each written and its reply
read before the next node's (so every server wakes once per call, cache-cold among the others,
as under dlock's parallel fan-out on one CPU), then the release likewise. Rows:

  raw floor    SET NX PX, then the compare-and-delete script
  dlock today  acquire.lua with ARGV[7] 'nr' (the node's counter, the record window covering
               the lease: its fast path is EXISTS, SET NX PX, INCR), then release.lua
  native       SET NX PX, EXISTS of the readers and the name's counter, INCR of the floor in
               one write (three replies), then release.lua: what a client whose record window
               covers the lease would send
  lean script  acquire.lua's fast path alone as a script of its own (9 strings, no other
               branch), then release.lua: what a smaller script saves, the Lua call kept

Per row and round, per cycle, summed over the nodes: the servers' CPU (INFO used_cpu_user +
used_cpu_sys: everything, the sockets and the wake-ups included, which a slow Python client
inflates) and the time inside the commands (INFO commandstats usec of EVALSHA and of the
commands sent outside a script, each counted once: what the acquisition's form changes). Prints per row the median over the rounds and the
median of the per-round ratios to `dlock today` and to the raw floor. Needs python3-redis.
"""
import os
import statistics
import sys

import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from redis_process import free_port, start_server  # noqa: E402
from script_text import with_key_clock  # noqa: E402

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "scripts")
TTL = "10000"
FLOOR = "dlock:fence-floor"
# acquire.lua's fast path alone (node counter, record window covering): what a lean script of
# only that would cost, Lua entry included.
LEAN = ("if ARGV[4] ~= 'w' then return -1 end "
        "local w = redis.call('exists', KEYS[5], KEYS[2]) == 0 and "
        "redis.pcall('set', KEYS[1], 'dlock. ' .. ARGV[2] .. ' ' .. ARGV[1], 'nx', 'px', ARGV[3]) "
        "if w and w.ok then local n = redis.call('incr', KEYS[3]) "
        "if n > 1e15 + 1 then return n end end return -2")
COMPARE_AND_DELETE = ("if redis.call('get', KEYS[1]) == ARGV[1] then "
                      "return redis.call('del', KEYS[1]) else return 0 end")


def load(r):
    sha = {"cad": r.script_load(COMPARE_AND_DELETE), "lean": r.script_load(LEAN)}
    for name in ("acquire", "release"):
        body = open(os.path.join(SRC, name + ".lua")).read()
        sha[name] = r.script_load(with_key_clock(SRC, body))
    return sha


def release(sha, name, hold):
    return ["EVALSHA", sha["release"], 4, name, "dlock:queue:{%s}" % name,
            "dlock:queue-alive:{%s}" % name, "dlock:readers:{%s}" % name, "owner",
            "dlock:release:{%s}" % name, hold, "w", "publish"]


def cycle(row, sha, name, hold):
    """The acquisition (a list of commands in one write) and the release of one cycle."""
    if row == "raw floor":
        return [["SET", name, "v", "NX", "PX", TTL]], ["EVALSHA", sha["cad"], 1, name, "v"]
    if row == "dlock today":
        acquire = ["EVALSHA", sha["acquire"], 6, name, "dlock:fence:{%s}" % name, FLOOR,
                   "dlock:max-ttl", "dlock:readers:{%s}" % name,
                   "dlock:writers-waiting:{%s}" % name, "owner", hold, TTL, "w", "0", "0", "nr"]
        return [acquire], release(sha, name, hold)
    if row == "lean script":
        return [["EVALSHA", sha["lean"], 5, name, "dlock:fence:{%s}" % name, FLOOR,
                 "dlock:max-ttl", "dlock:readers:{%s}" % name, "owner", hold, TTL, "w"]], \
            release(sha, name, hold)
    return ([["SET", name, "dlock. %s owner" % hold, "NX", "PX", TTL],
             ["EXISTS", "dlock:readers:{%s}" % name, "dlock:fence:{%s}" % name],
             ["INCR", FLOOR]], release(sha, name, hold))


def check(row, replies):
    if row == "native":
        ok = replies[0] is True and replies[1] == 0 and replies[2] > 10**15
    else:
        ok = replies[0] in (True, b"OK") or (isinstance(replies[0], int) and replies[0] > 10**15)
    if not ok:
        raise RuntimeError(f"{row}: not granted: {replies}")


def cpu(clients):
    return sum(c.info("cpu")["used_cpu_user"] + c.info("cpu")["used_cpu_sys"] for c in clients)


# The commands each row sends outside a script, once per node and cycle.
TOP_LEVEL = {"raw floor": ("set",), "native": ("set", "exists", "incr")}


def exec_us(clients, row, cycles):
    # INFO commandstats' usec of EVALSHA (its inner commands included), all nodes, and of the
    # commands the row sends outside a script. Redis counts a script's inner commands under
    # their own names too (release.lua's GET, DEL, EXISTS...): of those, only the share of the
    # calls that were top-level (cycles of them per node) is added, at the average cost per call.
    total = 0
    for c in clients:
        stats = c.info("commandstats")
        total += stats.get("cmdstat_evalsha", {}).get("usec", 0)
        for name in TOP_LEVEL.get(row, ()):
            v = stats.get("cmdstat_" + name)
            if v:
                total += v["usec"] * min(1.0, cycles / v["calls"])
    return total


def run(row, clients, shas, cycles, tag):
    for c in clients:
        c.config_resetstat()
    before = cpu(clients)
    for i in range(cycles):
        name, hold = f"{tag}:{i}", f"c.{i}"
        writes = [cycle(row, sha, name, hold) for sha in shas]
        for c, (acquire, _) in zip(clients, writes):
            pipe = c.pipeline(transaction=False)
            for command in acquire:
                pipe.execute_command(*command)
            check(row, pipe.execute())
        for c, (_, rel) in zip(clients, writes):
            if c.execute_command(*rel) not in (0, 1):
                raise RuntimeError(f"{row}: not released")
    spent = (cpu(clients) - before) * 1e6 / cycles
    return spent, exec_us(clients, row, cycles) / cycles


def main():
    nodes = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    cycles = int(sys.argv[2]) if len(sys.argv) > 2 else 4000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    os.sched_setaffinity(0, {1})
    servers, clients = [], []
    try:
        for _ in range(nodes):
            s, c = start_server(free_port(), "0")
            servers.append(s)
            clients.append(c)
        shas = [load(c) for c in clients]
        rows = ["raw floor", "dlock today", "native", "lean script"]
        for c in clients:  # a floor counted as dlock counts (from the clock)
            c.set(FLOOR, 1_800_000_000_000_000)
        results = {row: [] for row in rows}
        for k in range(rounds):
            order = rows[k % len(rows):] + rows[:k % len(rows)]
            for row in order:
                results[row].append(run(row, clients, shas, cycles, f"r{k}:{row}"))
        print(f"{nodes} nodes, {cycles} cycles x {rounds} rounds, per cycle, all nodes: Redis "
              "CPU (us), and the time inside its commands (exec, us); medians, and the medians "
              "of the per-round ratios")
        for row in rows:
            for i, what in ((0, "cpu "), (1, "exec")):
                mine = [r[i] for r in results[row]]
                to_today = statistics.median(
                    a[i] / b[i] for a, b in zip(results[row], results["dlock today"]))
                to_floor = statistics.median(
                    a[i] / b[i] for a, b in zip(results[row], results["raw floor"]))
                print(f"  {row:12} {what} {statistics.median(mine):7.1f}   "
                      f"/ dlock today {to_today:.3f}   / raw floor {to_floor:.3f}")
    finally:
        for s in servers:
            s.kill()
            s.wait()


if __name__ == "__main__":
    main()
