# SPDX-License-Identifier: MIT
"""Mutual exclusion and faults through several `dlock serve` instances (issue 31, "Tests"):
3 real redis-server nodes, 3 real service instances, and client processes in Python (Debian's
python3-grpcio, mutex_worker.py) and Node.js (@grpc/grpc-js, node/mutex_worker.js) going
through random instances. Their critical sections go to the chaos history checker
(tests/chaos/history.h, `dlock_chaos --check`): no overlap, fencing tokens rising per name.
Faults: `kill -9` of an instance while its clients hold, wait and keep alive; `kill -9` of a
client holding (its lock ends at its ttl, nobody enters before) and of a client waiting (no
queue place and no subscription left).

Usage: /usr/bin/python3 chaos_test.py DLOCK_BINARY PROTO_DIR NODE_DIR CHECKER [unittest args]
(CHECKER: the dlock_chaos binary.)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

CHECKER = sys.argv.pop(4) if len(sys.argv) > 4 else "dlock_chaos"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import node_test  # noqa: E402 (takes NODE_DIR, then DLOCK_BINARY and PROTO_DIR off sys.argv)
import service_test as st  # noqa: E402
from keepalive_test import Stream  # noqa: E402
from service_test import code_of, grpc, pb  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TTL_MS = 10000  # the cycles' ttl: far longer than a critical section, so none outlives it
WAIT_MS = 20000


class Worker:
    """A client process (python or node) running mutex_worker in `config`'s mode; its JSON
    lines are read on a thread as they come."""

    def __init__(self, language, modules, config):
        if language == "python":
            args = [sys.executable, os.path.join(HERE, "mutex_worker.py"),
                    json.dumps(dict(config, stubs=st._stubs))]
        else:
            args = ["node", os.path.join(HERE, "node", "mutex_worker.js"), modules, st.PROTO_DIR,
                    json.dumps(config)]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(json.loads(line))

    def of(self, kind):
        return [line[kind] for line in list(self.lines) if kind in line]

    def kill(self):
        self.proc.kill()
        return self.finish()

    def finish(self, timeout=60):
        """Waits for the process; its exit status, stderr read."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(timeout=20)
        self.stderr = self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return self.proc.returncode


class ThreeServices(unittest.TestCase):
    """3 Redis nodes and 3 service instances in front of them, each test with fresh instances
    (a test may kill one), and the Node.js packages (node_test.node_modules)."""

    @classmethod
    def setUpClass(cls):
        cls.nodes = [st.Redis() for _ in range(3)]

    @classmethod
    def tearDownClass(cls):
        for n in cls.nodes:
            n.close()

    def setUp(self):
        self.modules = node_test.node_modules(self)
        self.services = [st.Service([n.url for n in self.nodes]) for _ in range(3)]
        self.addresses = [s.address for s in self.services]
        self.name = self.id().rsplit(".", 1)[-1]
        for s in self.services:  # each instance greets the nodes before the clock starts
            s.stub.Status(pb.StatusRequest(name=self.name), timeout=30)

    def tearDown(self):
        killed = [s.proc.poll() is not None for s in self.services]
        codes = [s.stop() for s in self.services]
        self.assertEqual([c for c, k in zip(codes, killed) if not k], [0] * killed.count(False),
                         "dlock serve exit statuses")

    def kill_service(self, index):
        self.services[index].proc.kill()
        self.services[index].proc.wait()

    def workers(self, count, seconds, names, seed, addresses=None):
        """`count` Python and `count` Node.js workers in cycles mode."""
        out = []
        for language in ["python", "node"]:
            for k in range(count):
                out.append(Worker(language, self.modules, dict(
                    mode="cycles", id="%s-%d" % (language[:2], k), seed=seed + k,
                    addresses=addresses or self.addresses, names=names, seconds=seconds,
                    ttl_ms=TTL_MS, wait_ms=WAIT_MS, fair=False)))
        return out

    def check_history(self, workers, faults=()):
        """Runs the workers to their end, then the checker over their critical sections."""
        for w in workers:
            self.assertEqual(w.finish(timeout=120), 0, w.stderr)
        events = [e for w in workers for e in w.of("event")]
        lost = [x for w in workers for x in w.of("lost")]
        self.assertEqual(lost, [], "locks lost: released as not held")
        for language in ["py", "no"]:
            entered = [e for e in events if e["holder"].startswith(language) and
                       e["outcome"] == "accepted"]
            self.assertGreater(len(entered), 20, "%s clients entered too rarely" % language)
        for name in {e["name"] for e in events}:
            tokens = [e["token"] for e in sorted(events, key=lambda e: e["acquire_ns"])
                      if e["name"] == name and e["outcome"] == "accepted"]
            self.assertEqual(tokens, sorted(set(tokens)), "tokens of %s not rising" % name)
        folder = tempfile.mkdtemp(prefix="dlock-service-chaos-")
        path = os.path.join(folder, "history.jsonl")
        with open(path, "w") as f:
            for e in events:
                f.write(json.dumps({"event": e}) + "\n")
            for fault in faults:
                f.write(json.dumps({"fault": fault}) + "\n")
            f.write(json.dumps({"summary": dict(counter=-1, ttl_ms=TTL_MS,
                                                wait_bound_ms=WAIT_MS, drift_ms=0)}) + "\n")
        r = subprocess.run([CHECKER, "--check", path], capture_output=True, text=True)
        print(r.stdout, file=sys.stderr)
        self.assertEqual(r.returncode, 0, "%s (history kept in %s)" % (r.stdout, path))
        shutil.rmtree(folder, ignore_errors=True)
        return events


class MutexTest(ThreeServices):
    def test_python_and_node_clients_through_three_instances_never_overlap(self):
        names = ["mutex-a", "mutex-b", "mutex-c"]
        events = self.check_history(self.workers(3, 20, names, seed=31))
        self.assertEqual({e["name"] for e in events}, set(names))


class InstanceKillTest(ThreeServices):
    def test_keep_alive_moves_to_another_instance_when_one_is_killed(self):
        ttl = 2000
        a, b, c = self.services
        grant = a.stub.Acquire(pb.AcquireRequest(name=self.name, ttl_ms=ttl), timeout=30)
        lease = pb.LeaseRef(name=self.name, owner=grant.owner, ttl_ms=ttl)
        stream = Stream(a.stub)
        stream.send(lease)
        self.assertTrue(stream.wait_answers(2))
        contender = Contender(c.stub, self.name)
        self.kill_service(0)
        stream.reader.join(timeout=20)
        self.assertIsNotNone(stream.error, "the stream outlived its instance")
        last_at, last = stream.received()[-1]
        moved = Stream(b.stub)  # the client reopens its set on another instance
        moved.send(lease)
        self.assertTrue(moved.wait_answers(1))
        # B renewed before the validity A last reported ran out.
        self.assertLess(moved.received()[0][0], last_at + last.leases[0].validity_ms / 1000.0)
        time.sleep(3.5 * ttl / 1000)  # several ttls: only B's renewals keep it
        status = b.stub.Status(pb.StatusRequest(name=self.name), timeout=30)
        self.assertEqual([n.owners[0].owner for n in status.nodes], [grant.owner] * 3)
        answers = moved.received()
        self.assertGreaterEqual(len(answers), 4)
        for _, answer in answers:
            self.assertEqual(answer.leases[0].error, "")
            self.assertGreater(answer.leases[0].validity_ms, 0)
        moved.cancel()
        refusals = contender.stop()
        self.assertGreater(refusals, 10, "the contender hardly tried")
        b.stub.Release(pb.ReleaseRequest(name=self.name, owner=grant.owner), timeout=30)
        after = c.stub.Acquire(pb.AcquireRequest(name=self.name, ttl_ms=ttl), timeout=30)
        self.assertGreater(after.fencing_token, grant.fencing_token)
        c.stub.Release(pb.ReleaseRequest(name=self.name, owner=after.owner), timeout=30)

    def test_holds_and_waits_through_a_killed_instance_resume_through_another(self):
        a, b, c = self.services
        names = [self.name + "-plain", self.name + "-fair"]
        holders = [a.stub.Acquire(pb.AcquireRequest(name=n, ttl_ms=30000), timeout=30)
                   for n in names]
        requests = [pb.AcquireRequest(name=n, owner="waiter-" + n, ttl_ms=30000, wait_ms=40000,
                                      fair=n.endswith("fair")) for n in names]
        waits = [a.stub.Acquire.future(r, timeout=60) for r in requests]
        queue = "dlock:queue:{%s}" % names[1]
        self.assertTrue(st.wait_until(lambda: self.nodes[0].cli("ZCARD", queue) == "1"))
        time.sleep(0.3)  # the plain wait is in flight too
        self.kill_service(0)
        for w in waits:
            self.assertEqual(code_of(w.result, timeout=30), grpc.StatusCode.UNAVAILABLE)
        # No lock lost: both still held by their holders, refused to others.
        for n, h in zip(names, holders):
            status = b.stub.Status(pb.StatusRequest(name=n), timeout=30)
            self.assertEqual([x.owners[0].owner for x in status.nodes], [h.owner] * 3)
            self.assertEqual(code_of(c.stub.Acquire, pb.AcquireRequest(name=n, ttl_ms=1000),
                                     timeout=30), grpc.StatusCode.ABORTED)
        # The waits resume through another instance, and are granted on the release.
        waits = [b.stub.Acquire.future(r, timeout=60) for r in requests]
        time.sleep(0.5)
        self.assertFalse(any(w.done() for w in waits), "granted while held")
        released_at = time.monotonic()
        for n, h in zip(names, holders):
            c.stub.Release(pb.ReleaseRequest(name=n, owner=h.owner), timeout=30)
        for n, h, w in zip(names, holders, waits):
            grant = w.result(timeout=60)
            self.assertGreater(grant.fencing_token, h.fencing_token)
            self.assertLess(time.monotonic() - released_at, 30)
            c.stub.Release(pb.ReleaseRequest(name=n, owner=grant.owner), timeout=30)

    def test_clients_under_load_lose_nothing_when_an_instance_is_killed(self):
        names = ["kill-a", "kill-b"]
        workers = self.workers(2, 20, names, seed=7)
        time.sleep(8)
        killed = time.monotonic_ns()
        self.kill_service(0)
        # The fault's window: waits cut by the kill, and a grant whose answer died with the
        # instance (held until its ttl by an owner that gave up on it) may run out in it.
        fault = dict(kind="kill-service", target=self.addresses[0], start_ns=killed,
                     end_ns=killed + (TTL_MS + WAIT_MS) * 1_000_000)
        events = self.check_history(workers, faults=[fault])
        after = [e for e in events if e["acquire_ns"] > killed and e["outcome"] == "accepted"]
        self.assertGreater(len(after), 20, "few entered after the kill")


class Contender:
    """Tries to take `name` every 20 ms through `stub` on a thread until stopped; any grant is
    a failure of the test."""

    def __init__(self, stub, name):
        self.stub, self.name = stub, name
        self.codes = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopped.is_set():
            self.codes.append(code_of(self.stub.Acquire,
                                      pb.AcquireRequest(name=self.name, ttl_ms=1000), timeout=30))
            time.sleep(0.02)

    def stop(self):
        self.stopped.set()
        self.thread.join(timeout=60)
        assert set(self.codes) <= {grpc.StatusCode.ABORTED}, "contender got %r" % set(self.codes)
        return len(self.codes)


class ClientKillTest(ThreeServices):
    def test_a_killed_holders_lock_ends_at_its_ttl_and_nobody_enters_before(self):
        ttl = 2000
        holders = {}
        for language in ["python", "node"]:
            name = "%s-%s" % (self.name, language)
            holders[name] = Worker(language, self.modules, dict(
                mode="hold", id="holder-" + language, seed=3, addresses=self.addresses,
                names=[name], ttl_ms=ttl, wait_ms=0, fair=False))
        for w in holders.values():
            self.assertTrue(st.wait_until(lambda: len(w.of("hold")) >= 3, 30), w.of("hold"))
        # Waiters through the instances, one a fair wait, then the holders are killed.
        waits = {name: self.services[k + 1].stub.Acquire.future(pb.AcquireRequest(
                     name=name, ttl_ms=10000, wait_ms=40000, fair=k == 1), timeout=60)
                 for k, name in enumerate(holders)}
        granted_at = {}  # the grant's arrival, taken on gRPC's thread as it completes
        for name, future in waits.items():
            future.add_done_callback(
                lambda _, name=name: granted_at.setdefault(name, time.monotonic_ns()))
        time.sleep(0.3)
        killed = time.monotonic_ns()
        for w in holders.values():
            w.kill()
        for name, w in holders.items():
            grant = waits[name].result(timeout=60)
            granted = granted_at[name]
            last = w.of("hold")[-1]
            # The holder was promised its lease until at least the send time of its last
            # extend plus the validity that came back: nobody may enter before.
            self.assertGreaterEqual(granted, last["sent_ns"] + last["validity_ms"] * 1_000_000,
                                    name)
            self.assertLess(granted, killed + (ttl + 10000) * 1_000_000, "never expired")
            self.assertGreater(grant.fencing_token, last["token"])
            self.services[0].stub.Release(pb.ReleaseRequest(name=name, owner=grant.owner),
                                          timeout=30)

    def test_a_client_killed_mid_wait_leaves_no_queue_place_and_no_subscription(self):
        cases = [(language, fair) for language in ["python", "node"] for fair in [False, True]]
        waiting = []
        for k, (language, fair) in enumerate(cases):
            name = "%s-%s-%s" % (self.name, language, "fair" if fair else "plain")
            service = self.services[k % 3]
            holder = service.stub.Acquire(pb.AcquireRequest(name=name, ttl_ms=60000), timeout=30)
            worker = Worker(language, self.modules, dict(
                mode="wait", id="waiter-" + name, seed=k, addresses=[service.address],
                names=[name], ttl_ms=10000, wait_ms=40000, fair=fair))
            waiting.append((name, service, holder, worker, fair))
        for name, _, _, worker, fair in waiting:
            queue = "dlock:queue:{%s}" % name
            channel = "dlock:release:{%s}" % name
            self.assertTrue(st.wait_until(lambda: worker.of("waiting"), 30))
            self.assertTrue(st.wait_until(
                lambda: (self.nodes[0].cli("ZCARD", queue) == "1") if fair else
                self.nodes[0].cli("PUBSUB", "NUMSUB", channel).split()[-1] != "0", 30), name)
        time.sleep(0.3)  # every wait in flight
        for _, _, _, worker, _ in waiting:
            worker.kill()
        for name, service, holder, _, _ in waiting:
            for node in self.nodes:
                self.assertTrue(st.wait_until(
                    lambda: node.cli("ZCARD", "dlock:queue:{%s}" % name) == "0"),
                    "a queue place of %s stayed on port %d" % (name, node.port))
            status = service.stub.Status(pb.StatusRequest(name=name), timeout=30)
            self.assertEqual([n.owners[0].owner for n in status.nodes], [holder.owner] * 3)
            service.stub.Release(pb.ReleaseRequest(name=name, owner=holder.owner), timeout=30)
            # Nothing was granted to the gone waiter meanwhile (or it was given back).
            self.assertTrue(st.wait_until(lambda: not service.stub.Status(
                pb.StatusRequest(name=name), timeout=30).held), name)
        # The instance's shared subscription to a name's channel lingers 10 s after its last
        # waiter and goes when a later wait ends (docs/service.md): let one end on each.
        time.sleep(11)
        for k, service in enumerate(self.services):
            other = "%s-other-%d" % (self.name, k)
            held = service.stub.Acquire(pb.AcquireRequest(name=other, ttl_ms=30000), timeout=30)
            self.assertEqual(code_of(service.stub.Acquire, pb.AcquireRequest(
                name=other, ttl_ms=1000, wait_ms=100), timeout=30),
                grpc.StatusCode.DEADLINE_EXCEEDED)
            service.stub.Release(pb.ReleaseRequest(name=other, owner=held.owner), timeout=30)
        for name, _, _, _, _ in waiting:
            channel = "dlock:release:{%s}" % name
            for node in self.nodes:
                self.assertTrue(st.wait_until(
                    lambda: node.cli("PUBSUB", "NUMSUB", channel).split()[-1] == "0"),
                    "a subscription to %s stayed on port %d" % (channel, node.port))


if __name__ == "__main__":
    try:
        unittest.main(verbosity=2)
    finally:
        shutil.rmtree(st._stubs, ignore_errors=True)
