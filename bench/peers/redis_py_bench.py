#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# redis-py's Lock (Debian's python3-redis) under the benchmark's workloads; run by dlock_bench.
# Usage: redis_py_bench.py MODE PARAMS_JSON   -> one JSON object on stdout.
#   latency    {"ports": [p], "cycles": n, "warmup": w}             -> {"samples_ns": [...]}
#   throughput {"ports": [p], "inflight": k, "seconds": s}          -> {"per_second": x}
#   contend    {"ports": [p], "name": s, "count": n, "hold_us": h,
#               "start_at_ns": t, "retry_ms": r}                    -> {"events": [[s, a, r]]}
# redis-py's Lock talks to one node; timestamps are CLOCK_MONOTONIC like the other workers'.
import json
import sys
import threading
import time

import redis


def client(params, pool_size=4):
    pool = redis.ConnectionPool(host="127.0.0.1", port=params["ports"][0],
                                max_connections=max(pool_size, 4))
    return redis.Redis(connection_pool=pool)


def latency(params):
    r = client(params)
    samples = []
    for i in range(-params["warmup"], params["cycles"]):
        t0 = time.monotonic_ns()
        lock = r.lock("bench:latency", timeout=30)
        if not lock.acquire(blocking=False):
            raise SystemExit("redis-py: not acquired")
        lock.release()
        if i >= 0:
            samples.append(time.monotonic_ns() - t0)
    return {"samples_ns": samples}


def throughput(params):
    k = params["inflight"]
    r = client(params, k)
    stop = threading.Event()
    counts = [0] * k

    def work(i):
        name = "bench:tp:%d" % i
        while not stop.is_set():
            lock = r.lock(name, timeout=30)
            lock.acquire(blocking=False)
            lock.release()
            counts[i] += 1

    threads = [threading.Thread(target=work, args=(i,)) for i in range(k)]
    t0 = time.monotonic_ns()
    for t in threads:
        t.start()
    time.sleep(params["seconds"])
    stop.set()
    t1 = time.monotonic_ns()
    for t in threads:
        t.join()
    return {"per_second": sum(counts) / ((t1 - t0) / 1e9)}


def contend(params):
    r = client(params)
    # sleep: the pause between retries (redis-py's default is 0.1 s; the benchmark passes its
    # retry_ms so every library that polls is given the same, shorter, pause).
    sleep = params["retry_ms"] / 1000.0
    while time.monotonic_ns() < params["start_at_ns"]:
        time.sleep(0.0002)
    events = []
    hold = params["hold_us"] / 1e6
    for _ in range(params["count"]):
        start = time.monotonic_ns()
        lock = r.lock(params["name"], timeout=30, sleep=sleep)
        if not lock.acquire(blocking=True, blocking_timeout=120):
            raise SystemExit("redis-py: wait timed out")
        acquired = time.monotonic_ns()
        time.sleep(hold)
        released = time.monotonic_ns()
        lock.release()
        events.append([start, acquired, released])
    return {"events": events}


if __name__ == "__main__":
    mode, params = sys.argv[1], json.loads(sys.argv[2])
    print(json.dumps({"latency": latency, "throughput": throughput, "contend": contend}[mode](params)))
