# SPDX-License-Identifier: MIT
"""One client process of chaos_test.py, on Debian's python3-grpcio: it goes through random
`dlock serve` instances and prints what it did as JSON lines on stdout.

Usage: /usr/bin/python3 mutex_worker.py CONFIG_JSON
CONFIG: {"stubs": generated stubs folder, "addresses": [gRPC addresses], "names": [...],
"mode": "cycles" | "hold" | "wait", "seconds", "seed", "ttl_ms", "wait_ms", "fair", "id"}.

- cycles: for `seconds`, take a random name through a random instance (a try retried, or a
  wait), stay inside a few ms, release through a random instance; each critical section is
  one {"event": ...} line in the chaos history checker's form (tests/chaos/history.h), on
  CLOCK_MONOTONIC (time.monotonic_ns), the clock the Node.js worker reads too. A release
  refused as not held (the lock lost) is a {"lost": ...} line.
- hold: take names[0], then extend it every ttl/4 through random instances, a {"hold": ...}
  line per answer with the time the extend was sent: it holds until killed.
- wait: wait for names[0] (wait_ms, fair), after a {"waiting": ...} line; killed mid-wait.
"""
import json
import random
import sys
import time

CONFIG = json.loads(sys.argv[1])
sys.path.insert(0, CONFIG["stubs"])
import grpc  # noqa: E402
from dlock.v1 import lock_pb2 as pb  # noqa: E402
from dlock.v1 import lock_pb2_grpc as pb_grpc  # noqa: E402

RETRY = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}
rng = random.Random(CONFIG.get("seed", 0))
stubs = [pb_grpc.LocksStub(grpc.insecure_channel(a)) for a in CONFIG["addresses"]]


def emit(kind, fields):
    print(json.dumps({kind: fields}), flush=True)


def acquire(name, owner, wait_ms, fair):
    """(grant, the send time of the call that got it, first send time); grant None: the wait
    ran out. A try refused (ABORTED) is tried again; a dead instance, on another."""
    first = time.monotonic_ns()
    while True:
        sent = time.monotonic_ns()
        try:
            grant = rng.choice(stubs).Acquire(
                pb.AcquireRequest(name=name, owner=owner, ttl_ms=CONFIG["ttl_ms"],
                                  wait_ms=wait_ms, fair=fair), timeout=wait_ms / 1000 + 20)
            return grant, sent, first
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                return None, sent, first
            if e.code() in RETRY:
                # The grant may have happened before the instance died: give it back.
                release(name, owner, after_unavailable=True)
            elif e.code() != grpc.StatusCode.ABORTED:
                raise
            time.sleep(rng.uniform(0.001, 0.01))


def release(name, owner, after_unavailable=False):
    """True when released; False when the nodes say it was not held (after an attempt that a
    dead instance may have carried out, that is no loss)."""
    for _ in range(50):
        try:
            rng.choice(stubs).Release(pb.ReleaseRequest(name=name, owner=owner), timeout=20)
            return True
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.FAILED_PRECONDITION:
                return after_unavailable
            if e.code() not in RETRY:
                raise
            after_unavailable = True
            time.sleep(0.05)
    raise RuntimeError("no instance released %s" % name)


def cycle(number):
    name = rng.choice(CONFIG["names"])
    owner = "%s-%d" % (CONFIG["id"], number)
    wait_ms = rng.choice([0, CONFIG["wait_ms"]])
    grant, sent, first = acquire(name, owner, wait_ms, wait_ms > 0 and rng.random() < 0.5)
    event = dict(name=name, holder=CONFIG["id"], token=0, wait_ns=first, read_ns=0,
                 write_ns=0, paused=False, skewed=False)
    if grant is None:
        now = time.monotonic_ns()
        emit("event", dict(event, acquire_ns=now, valid_until_ns=now, release_ns=now,
                           outcome="timeout"))
        return
    entered = time.monotonic_ns()
    time.sleep(rng.uniform(0.001, 0.005))
    left = time.monotonic_ns()
    emit("event", dict(event, token=grant.fencing_token, acquire_ns=entered,
                       valid_until_ns=sent + grant.validity_ms * 1_000_000, release_ns=left,
                       outcome="accepted"))
    if not release(name, owner):
        emit("lost", dict(name=name, owner=owner, token=grant.fencing_token))


def hold():
    name = CONFIG["names"][0]
    owner = CONFIG["id"]
    grant, sent, _ = acquire(name, owner, CONFIG["wait_ms"], False)
    emit("hold", dict(name=name, owner=owner, token=grant.fencing_token, sent_ns=sent,
                      validity_ms=grant.validity_ms))
    while True:
        time.sleep(CONFIG["ttl_ms"] / 4000)
        sent = time.monotonic_ns()
        answer = rng.choice(stubs).Extend(
            pb.ExtendRequest(name=name, owner=owner, ttl_ms=CONFIG["ttl_ms"]), timeout=20)
        emit("hold", dict(name=name, owner=owner, token=grant.fencing_token, sent_ns=sent,
                          validity_ms=answer.validity_ms))


def wait():
    emit("waiting", dict(sent_ns=time.monotonic_ns()))
    grant, _, _ = acquire(CONFIG["names"][0], CONFIG["id"], CONFIG["wait_ms"], CONFIG["fair"])
    emit("granted", dict(token=grant.fencing_token if grant else 0))


if __name__ == "__main__":
    if CONFIG["mode"] == "hold":
        hold()
    elif CONFIG["mode"] == "wait":
        wait()
    else:
        end = time.monotonic() + CONFIG["seconds"]
        number = 0
        while time.monotonic() < end:
            cycle(number)
            number += 1
