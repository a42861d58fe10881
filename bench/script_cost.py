#!/usr/bin/python3
"""Redis CPU per lock cycle, script by script (issue 13).

Runs N pipelined calls of dlock's scripts, and of the raw floor (SET NX PX, then the
compare-and-delete script), on a private redis-server, and reads INFO commandstats around each
batch. `usec` there counts a command's execution only (not the socket reads and writes around
it), so this isolates what the scripts cost; the inner calls per cycle show where it goes.

    taskset -c 0 /usr/bin/python3 bench/script_cost.py [src/scripts] [N] [node|name]

node (the default): acquire.lua counts tokens with the node's counter, as a client of a lock set
of one node asks it to; name: with the name's counter, as a client of several nodes does.

Needs python3-redis (bench/run.sh installs it). Compare rows of one run only.
"""
import os
import sys


from redis_process import free_port, start_server
from script_text import with_key_clock

SRC = sys.argv[1] if len(sys.argv) > 1 else "src/scripts"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
COUNTER = "" if len(sys.argv) > 3 and sys.argv[3] == "name" else "n"
COMPARE_AND_DELETE = ("if redis.call('get', KEYS[1]) == ARGV[1] then "
                      "return redis.call('del', KEYS[1]) else return 0 end")


# The scripts that keep deadlines inside keys run with key_clock.lua's functions before their
# text or inside it (src/scripts/script.cc, `clocked`; script_text.py); loaded bare they fail with "nonexistent global
# variable 'server_ms'".
CLOCKED = ("acquire", "fair_acquire", "release", "renew", "inspect", "fair_leave")


def load_scripts(r, src):
    sha = {}
    for name in os.listdir(src):
        if not name.endswith(".lua") or name == "key_clock.lua":
            continue
        body = open(os.path.join(src, name)).read()
        sha[name[:-4]] = r.script_load(with_key_clock(src, body) if name[:-4] in CLOCKED else body)
    return sha


def measure(r, label, calls):
    """Server µs per cycle over `calls` (N cycles), and the inner commands per cycle."""
    r.config_resetstat()
    pipe = r.pipeline(transaction=False)
    for i, call in enumerate(calls):
        pipe.execute_command(*call)
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()
    stats = r.info("commandstats")
    top = ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_set")
    total = sum(v["usec"] for k, v in stats.items() if k in top)
    inner = {k[len("cmdstat_"):]: v["calls"] / N for k, v in stats.items()
             if k not in ("cmdstat_evalsha", "cmdstat_config|resetstat", "cmdstat_info")}
    print(f"{label:32s} {total / N:6.2f} µs   inner commands per cycle: " +
          " ".join(f"{k}={v:.0f}" for k, v in sorted(inner.items())))


def main():
    server, r = start_server(free_port())
    try:
        sha = load_scripts(r, SRC)
        cad = r.script_load(COMPARE_AND_DELETE)

        def acquire(name, hold="c.1"):
            return ["EVALSHA", sha["acquire"], 6, name, "dlock:fence:{%s}" % name,
                    "dlock:fence-floor", "dlock:max-ttl", "dlock:readers:{%s}" % name,
                    "dlock:writers-waiting:{%s}" % name, "owner", hold, "30000", "w", "0", "0",
                    COUNTER]

        def release(name, hold="c.1"):
            return ["EVALSHA", sha["release"], 4, name, "dlock:queue:{%s}" % name,
                    "dlock:queue-alive:{%s}" % name, "dlock:readers:{%s}" % name, "owner",
                    "dlock:release:{%s}" % name, hold, "w", "publish"]

        def raw(name):
            return [["SET", name, "v", "NX", "PX", "30000"], ["EVALSHA", cad, 1, name, "v"]]

        measure(r, "raw floor, one name", [c for _ in range(N) for c in raw("raw")])
        measure(r, "raw floor, a new name", [c for i in range(N) for c in raw(f"raw:{i}")])
        measure(r, "dlock, one name", [c for i in range(N) for c in
                                       (acquire("one", f"c.{i + 1}"), release("one", f"c.{i + 1}"))])
        measure(r, "dlock, a new name", [c for i in range(N) for c in
                                         (acquire(f"new:{i}"), release(f"new:{i}"))])
        measure(r, "dlock acquire, a new name", [acquire(f"a:{i}") for i in range(N)])
        measure(r, "dlock release", [release(f"a:{i}") for i in range(N)])
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
