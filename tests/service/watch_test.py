# SPDX-License-Identifier: MIT
"""The lock service's Watch stream end to end (Debian's python3-grpcio), on 3 real
redis-server processes through real `dlock serve` instances: an event with the current holder
at once, then one per change of holder (taken, released, taken again by the same owner, a read
lock); a cancelled watch ends and the service serves on; SIGTERM ends a watch at once with
UNAVAILABLE and the service exits 0.

Usage: /usr/bin/python3 watch_test.py DLOCK_BINARY PROTO_DIR [unittest arguments]
"""
import os
import shutil
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import service_test as st  # noqa: E402 (takes DLOCK_BINARY and PROTO_DIR off sys.argv)
from service_test import code_of, curl, grpc, pb  # noqa: E402


class Watch:
    """A Watch stream read on a thread of its own: its events, and how it ended."""

    def __init__(self, stub, name, timeout=60):
        self.events = []
        self.lock = threading.Lock()
        self.error = None
        self.call = stub.Watch(pb.WatchRequest(name=name), timeout=timeout)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        try:
            for event in self.call:
                with self.lock:
                    self.events.append(event)
        except grpc.RpcError as e:
            self.error = e

    def received(self):
        with self.lock:
            return list(self.events)

    def wait_events(self, n, seconds=20):
        return st.wait_until(lambda: len(self.received()) >= n, seconds)

    def ended(self, seconds=20):
        self.reader.join(timeout=seconds)
        return not self.reader.is_alive()


class WatchTest(st.TwoServices):
    prefix = "watch-"

    def series(self, name):
        """The value of one series of the service's /metrics (0 when absent)."""
        _, text = curl("GET", self.service.http + "/metrics")
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def test_an_event_per_change_of_holder_from_the_current_state_on(self):
        first = self.acquire(ttl_ms=30000)
        watch = Watch(self.stub, self.name)
        self.assertTrue(watch.wait_events(1))
        now = watch.received()[0]
        self.assertEqual((now.name, now.held, now.owner), (self.name, True, first.owner))
        self.assertGreaterEqual(now.fence, first.fencing_token)
        # Released and taken through the other instance: the watch sees each holder.
        self.other.stub.Release(pb.ReleaseRequest(name=self.name, owner=first.owner), timeout=30)
        self.assertTrue(watch.wait_events(2))
        self.assertEqual((watch.received()[1].held, watch.received()[1].owner), (False, ""))
        second = self.acquire(stub=self.other.stub, ttl_ms=30000, owner="second-owner")
        self.assertTrue(watch.wait_events(3))
        taken = watch.received()[2]
        self.assertEqual((taken.held, taken.owner), (True, "second-owner"))
        self.assertGreaterEqual(taken.fence, second.fencing_token)
        self.assertGreater(taken.fence, now.fence)
        # The same owner again, after a release: a new holding, a new event.
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner="second-owner"), timeout=30)
        third = self.acquire(ttl_ms=30000, owner="second-owner")
        self.assertTrue(st.wait_until(
            lambda: any(e.fence >= third.fencing_token for e in watch.received()), 20))
        last = watch.received()[-1]
        self.assertEqual((last.held, last.owner), (True, "second-owner"))
        # An extend is no change of holder: nothing more is sent.
        count = len(watch.received())
        self.stub.Extend(pb.ExtendRequest(name=self.name, owner="second-owner", ttl_ms=30000),
                         timeout=30)
        time.sleep(0.5)  # five reads of the status
        self.assertEqual(len(watch.received()), count)
        cancelled = ('dlock_service_requests_total{transport="grpc",'
                     'endpoint="/dlock.v1.Locks/Watch",status="CANCELLED"}')
        before = self.series(cancelled)
        watch.call.cancel()
        self.assertTrue(watch.ended())
        self.assertEqual(watch.error.code(), grpc.StatusCode.CANCELLED)
        # The service ended its side of the stream too (counted as it sent the status).
        self.assertTrue(st.wait_until(lambda: self.series(cancelled) == before + 1))
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner="second-owner"), timeout=30)
        # The instance serves on after the cancelled watch.
        self.assertFalse(self.stub.Status(pb.StatusRequest(name=self.name), timeout=30).held)

    def test_a_read_lock_is_held_without_an_owner(self):
        watch = Watch(self.stub, self.name)
        self.assertTrue(watch.wait_events(1))
        self.assertFalse(watch.received()[0].held)
        reader = self.acquire(ttl_ms=30000, mode=pb.SHARED)
        self.assertTrue(watch.wait_events(2))
        self.assertEqual((watch.received()[1].held, watch.received()[1].owner), (True, ""))
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=reader.owner, mode=pb.SHARED),
                          timeout=30)
        self.assertTrue(watch.wait_events(3))
        self.assertFalse(watch.received()[2].held)
        watch.call.cancel()
        self.assertTrue(watch.ended())

    def test_an_empty_name_is_invalid_argument(self):
        self.assertEqual(code_of(lambda: next(self.stub.Watch(pb.WatchRequest(), timeout=30))),
                         grpc.StatusCode.INVALID_ARGUMENT)


class WatchShutdownTest(unittest.TestCase):
    def test_sigterm_ends_a_watch_at_once_with_unavailable(self):
        node = st.Redis()
        service = st.Service([node.url])
        try:
            watch = Watch(service.stub, "w")
            self.assertTrue(watch.wait_events(1))
            started = time.monotonic()
            # SIGTERM alone: Service.stop() would close the client's channel first.
            service.proc.send_signal(signal.SIGTERM)
            self.assertTrue(watch.ended())
            self.assertLess(time.monotonic() - started, 10)  # generous: a busy machine
            # Ended by the service itself (its message), not cut off when gRPC's 2 s shutdown
            # grace ran out.
            self.assertEqual(watch.error.code(), grpc.StatusCode.UNAVAILABLE)
            self.assertIn("the service is stopping", watch.error.details())
            self.assertEqual(service.proc.wait(timeout=20), 0)
        finally:
            service.stop()
            node.close()


if __name__ == "__main__":
    try:
        unittest.main(verbosity=2)
    finally:
        shutil.rmtree(st._stubs, ignore_errors=True)
