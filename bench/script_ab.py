#!/usr/bin/python3
"""Redis CPU per lock cycle of two versions of acquire.lua + release.lua, in paired rounds.

    taskset -c 1 /usr/bin/python3 bench/script_ab.py OLD_DIR NEW_DIR [ROUNDS] [node|name] [--one]

OLD_DIR and NEW_DIR are folders of scripts (src/scripts of two checkouts: `git worktree add
/tmp/old REV`). Each round runs N uncontended cycles (a new name each) of one version, then of
the other, the order swapped every round, on one private redis-server pinned to CPU 0, and reads
INFO cpu (used_cpu_user + used_cpu_sys) around each: the server's CPU per cycle. A machine whose
speed drifts moves both halves of a round alike, so the median of the per-round ratios new ÷ old
sees through drift that single runs do not (bench/run.sh measures each row once).

node (the default): acquire.lua counts tokens with the node's counter (a client of a lock set
of one node); name: with the name's counter (a client of several nodes). Pipelined, 1,000 calls
per flush, by default; --one: each call waits for its reply (Python's client is heavier than
dlock's, so read the ratio, not the absolute times, against bench/run.sh's one-in-flight row).
Needs python3-redis (bench/install-peers.sh, or apt-get install python3-redis).
"""
import os
import statistics
import sys

from redis_process import free_port, start_server
from script_text import with_key_clock

ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
OLD, NEW = ARGS[0], ARGS[1]
ROUNDS = int(ARGS[2]) if len(ARGS) > 2 else 16
COUNTER = "" if len(ARGS) > 3 and ARGS[3] == "name" else "n"
ONE_AT_A_TIME = "--one" in sys.argv
N = 4000 if ONE_AT_A_TIME else 10000
TTL = "30000"


def load(client, folder):
    """SHA of acquire.lua and release.lua of `folder`, as script.cc sends them."""
    return {name: client.script_load(
        with_key_clock(folder, open(os.path.join(folder, name + ".lua")).read()))
        for name in ("acquire", "release")}


def cycle(sha, name):
    """An acquisition and the release of its hold, as dlock's client calls them."""
    return [["EVALSHA", sha["acquire"], 6, name, "dlock:fence:{%s}" % name, "dlock:fence-floor",
             "dlock:max-ttl", "dlock:readers:{%s}" % name, "dlock:writers-waiting:{%s}" % name,
             "owner", "c.1", TTL, "w", "0", "0", COUNTER],
            ["EVALSHA", sha["release"], 4, name, "dlock:queue:{%s}" % name,
             "dlock:queue-alive:{%s}" % name, "dlock:readers:{%s}" % name, "owner",
             "dlock:release:{%s}" % name, "c.1", "w", "publish"]]


def cpu_seconds(client):
    info = client.info("cpu")
    return info["used_cpu_user"] + info["used_cpu_sys"]


def run(client, commands):
    if ONE_AT_A_TIME:
        for command in commands:
            client.execute_command(*command)
        return
    for at in range(0, len(commands), 1000):
        pipe = client.pipeline(transaction=False)
        for command in commands[at:at + 1000]:
            pipe.execute_command(*command)
        pipe.execute()


def main():
    server, client = start_server(free_port(), "0")
    try:
        sha = {"old": load(client, OLD), "new": load(client, NEW)}
        for which in sha:  # both grant and release: a broken script is no measurement
            granted, released = [client.execute_command(*c) for c in cycle(sha[which], "check")]
            if not isinstance(granted, int) or granted <= 0 or released < 0:
                raise RuntimeError("%s: cycle replied %r, %r" % (which, granted, released))
        per_cycle = {"old": [], "new": []}
        ratios = []
        for r in range(ROUNDS):
            got = {}
            for which in (("old", "new") if r % 2 == 0 else ("new", "old")):
                commands = [c for i in range(N)
                            for c in cycle(sha[which], "%s%d:%d" % (which, r, i))]
                before = cpu_seconds(client)
                run(client, commands)
                got[which] = (cpu_seconds(client) - before) / N * 1e6
                per_cycle[which].append(got[which])
            ratios.append(got["new"] / got["old"])
        print("%s counter, %s, %d rounds of %d cycles: old %.2f µs, new %.2f µs per cycle "
              "(medians); new ÷ old %.3f (median of the rounds' ratios), new lower in %d of %d"
              % ("node's" if COUNTER else "name's", "one at a time" if ONE_AT_A_TIME else
                 "pipelined", ROUNDS, N, statistics.median(per_cycle["old"]),
                 statistics.median(per_cycle["new"]), statistics.median(ratios),
                 sum(x < 1 for x in ratios), ROUNDS))
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
