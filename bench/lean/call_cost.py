#!/usr/bin/python3
"""What a script call costs Redis before its script does anything (issue 32): per string handed
to Lua, and EVALSHA against a Redis 7 function (FCALL).

Runs, on a private redis-server, N pipelined calls of a script that only replies `1`, with 0, 7,
13 (acquire.lua's 6 keys + 7 arguments) and 20 strings, by EVALSHA, and the same as a function
of a library loaded with FUNCTION LOAD, by FCALL. Reads `INFO commandstats` (usec_per_call:
the command's execution, not the socket reads around it) after each batch; prints the median of
ROUNDS rounds per row, interleaved.

    taskset -c 0 /usr/bin/python3 bench/lean/call_cost.py [N] [ROUNDS]

Compare rows of one run only: the machine's load moves them all.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from redis_process import free_port, start_server  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
LIBRARY = ("#!lua name=dlock_call_cost\n"
           "redis.register_function('ret1', function(keys, args) return 1 end)")


def strings(keys, args):
    """`keys` key names of one slot and `args` arguments, about as long as dlock's."""
    return ([f"dlock:k{i}:{{name-12345}}" for i in range(keys)],
            [f"argument-value-{i}-abcdef" for i in range(args)])


def usec_per_call(r, command):
    r.config_resetstat()
    pipe = r.pipeline(transaction=False)
    for i in range(N):
        pipe.execute_command(*command)
        if i % 500 == 499:
            pipe.execute()
    pipe.execute()
    stats = r.info("commandstats")
    return stats["cmdstat_" + command[0].lower()]["usec_per_call"]


def main():
    server, r = start_server(free_port())
    try:
        sha = r.script_load("return 1")
        r.execute_command("FUNCTION", "LOAD", "REPLACE", LIBRARY)
        rows = {}
        for keys, args in ((0, 0), (4, 3), (6, 7), (8, 12)):
            k, a = strings(keys, args)
            rows[f"EVALSHA, {keys + args} strings"] = ["EVALSHA", sha, keys, *k, *a]
            if keys + args in (0, 13):
                rows[f"FCALL, {keys + args} strings"] = ["FCALL", "ret1", keys, *k, *a]
        got = {name: [] for name in rows}
        for _ in range(ROUNDS):
            for name, command in rows.items():
                got[name].append(usec_per_call(r, command))
        for name, values in got.items():
            print(f"{name:22s} {statistics.median(values):5.2f} µs per call (median of {ROUNDS})")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
