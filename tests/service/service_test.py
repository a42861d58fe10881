# SPDX-License-Identifier: MIT
"""The lock service end to end: real redis-server processes, real `dlock serve` processes, and
a client this project did not write (Debian's python3-grpcio, with stubs that protoc and
grpc_python_plugin generate from proto/dlock/v1/lock.proto at test time).

Usage: /usr/bin/python3 service_test.py DLOCK_BINARY PROTO_DIR [unittest arguments]
(/usr/bin/python3: Debian's interpreter, the one that sees python3-grpcio.)
"""
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

DLOCK = sys.argv[1] if len(sys.argv) > 1 else "dlock"
PROTO_DIR = sys.argv[2] if len(sys.argv) > 2 else "proto"
del sys.argv[1:3]

import grpc  # noqa: E402 (after the argument handling above)
import redis  # noqa: E402 (Debian's python3-redis: a query is a round trip, not a process)

_stubs = tempfile.mkdtemp(prefix="dlock-service-test-")
subprocess.run(["protoc", "-I", PROTO_DIR, "--python_out", _stubs, "--grpc_out", _stubs,
                "--plugin=protoc-gen-grpc=" + shutil.which("grpc_python_plugin"),
                os.path.join(PROTO_DIR, "dlock/v1/lock.proto")], check=True)
sys.path.insert(0, _stubs)
from dlock.v1 import lock_pb2 as pb  # noqa: E402
from dlock.v1 import lock_pb2_grpc as pb_grpc  # noqa: E402

_port_claims = os.open(os.path.join(os.environ.get("TMPDIR") or "/tmp",
                                    "dlock-ports-%d.lock" % os.getuid()),
                       os.O_RDWR | os.O_CREAT, 0o600)


def free_port():
    """A free loopback port that no other test process claimed: the C++ tests' claim file
    (tools/sandbox/redis_process.cc), a record lock on byte PORT, held while this process lives."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            fcntl.lockf(_port_claims, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, port, os.SEEK_SET)
            return port
        except OSError:
            continue
    raise RuntimeError("no unclaimed port")


def lock_held_by(value, owner):
    """Whether `value` (redis-cli GET of a lock key) is a dlock write hold of `owner`: the string
    "dlock" F " " HOLD_ID " " OWNER (docs/protocol.md, "The lock key")."""
    parts = value.split(" ", 2)
    return (len(parts) == 3 and parts[0] in ("dlock.", "dlock!") and parts[1] != ""
            and parts[2] == owner)


def redis_cli_text(reply):
    """A reply as redis-cli prints it into a pipe: nil as nothing, an integer in decimal, an
    array one element per line."""
    if reply is None:
        return ""
    if isinstance(reply, bytes):
        return reply.decode()
    if isinstance(reply, list):
        return "\n".join(redis_cli_text(x) for x in reply)
    return str(reply)


def wait_until(predicate, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


class Redis:
    """One redis-server on loopback, no persistence; killed by pid. Queried on a connection of
    its own (tests poll it every 20 ms: a redis-cli process per query cost more CPU than the
    servers)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="dlock-service-redis-")
        self._conn = None
        self._conn_timeout = None
        self._conn_lock = threading.Lock()
        # A free port can be taken by a parallel test (a client's ephemeral port) between
        # free_port() and the server's bind: the server then exits, and another port is tried,
        # as tests/support/redis_server.cc does.
        for attempt in range(5):
            self.port = free_port()
            self._disconnect()
            self.proc = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", self.dir],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if wait_until(lambda: self.proc.poll() is not None or self.started() == "PONG"):
                # Ours (alive: its bind worked), not another test's server that took the port.
                if self.proc.poll() is None and (
                        "process_id:%d" % self.proc.pid) in self.started("INFO", "server"):
                    return
            self.proc.kill()
            self.proc.wait()
        raise RuntimeError("redis-server on port %d did not answer" % self.port)

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def _disconnect(self):
        with self._conn_lock:
            self._drop()

    def _drop(self):
        """Closes the connection, if any (the caller holds _conn_lock)."""
        if self._conn is not None:
            self._conn.disconnect()
            self._conn = None

    def _query(self, args, timeout):
        """One command, its reply as redis-cli prints it (an error reply as "(error) ..."); ""
        when the server cannot be reached or does not answer within `timeout`, as redis-cli's
        output then (the next query connects again)."""
        with self._conn_lock:
            try:
                if self._conn_timeout != timeout:
                    self._drop()  # started()'s 2 s is not cli()'s
                if self._conn is None:
                    self._conn = redis.Connection(host="127.0.0.1", port=self.port,
                                                  socket_timeout=timeout,
                                                  socket_connect_timeout=timeout)
                    self._conn_timeout = timeout
                self._conn.send_command(*args)
                return redis_cli_text(self._conn.read_response())
            except redis.ResponseError as e:
                return "(error) %s" % e
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                self._drop()
                return ""

    def started(self, *args):
        """cli() while starting, bounded: whatever took the port may accept and never answer."""
        return self._query(list(args or ["PING"]), timeout=2)

    def cli(self, *args):
        return self._query(list(args), timeout=30)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._disconnect()

    def close(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class Service:
    """A `dlock serve` process in front of `redis_urls`, on a free gRPC port."""

    def __init__(self, redis_urls):
        args = [DLOCK, "serve", "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"]
        for url in redis_urls:
            args += ["-r", url]
        # stderr is the test's own: what dlock serve says there shows in ctest's output.
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        lines = [self.proc.stdout.readline(), self.proc.stdout.readline()]
        if not (lines[0].startswith("dlock serve: grpc ") and
                lines[1].startswith("dlock serve: http ")):
            self.proc.kill()
            raise RuntimeError("dlock serve did not start: %r" % lines)
        self.address = lines[0].split()[-1]
        self.http = "http://" + lines[1].split()[-1]
        self.channel = grpc.insecure_channel(self.address)
        self.stub = pb_grpc.LocksStub(self.channel)

    def greet_nodes(self):
        """One lease taken and released on a name of its own: the instance's first call
        connects to every node and greets it, which took longer than a test's short lease on a
        busy 2-core machine (CI: a 600 ms lease gone before the extension that first used the
        instance). A test's first call then measures the call, not the first contact."""
        grant = self.stub.Acquire(pb.AcquireRequest(name="greet-nodes", ttl_ms=10000),
                                  timeout=60)
        self.stub.Release(pb.ReleaseRequest(name="greet-nodes", owner=grant.owner), timeout=30)

    def stop(self):
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        return self.proc.returncode


def curl(method, url, body=None, max_time=30):
    """(HTTP status, the JSON body or the text) of one request made with curl."""
    args = ["curl", "-s", "-X", method, "--max-time", str(max_time), "-w", "\n%{http_code}",
            url]
    if body is not None:
        args += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
    r = subprocess.run(args, input=body if isinstance(body, str) else json.dumps(body),
                       capture_output=True, text=True)
    text, _, status = r.stdout.rpartition("\n")
    try:
        return int(status), json.loads(text)
    except ValueError:
        return int(status or 0), text.strip()


def scrape(service):
    """{series: value} of a service's /metrics, e.g. 'dlock_..._total{a="b"}': 3.0."""
    status, text = curl("GET", service.http + "/metrics")
    if status != 200:
        raise AssertionError("GET /metrics answered %s" % status)
    series = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            series[key] = float(value)
    return series


def code_of(call, *args, **kwargs):
    try:
        call(*args, **kwargs)
    except grpc.RpcError as e:
        return e.code()
    return grpc.StatusCode.OK


class TwoServices(unittest.TestCase):
    """3 Redis nodes (Redlock), one service instance and a second for the cross-instance cases;
    each test on a name of its own (`prefix` and the test's name). The base of the service
    suites in this directory; it has no tests of its own."""

    prefix = "svc-"

    @classmethod
    def setUpClass(cls):
        cls.nodes = [Redis() for _ in range(3)]
        cls.service = Service([n.url for n in cls.nodes])
        cls.other = Service([n.url for n in cls.nodes])
        for service in (cls.service, cls.other):
            service.greet_nodes()

    @classmethod
    def tearDownClass(cls):
        codes = [cls.service.stop(), cls.other.stop()]
        for n in cls.nodes:
            n.close()
        assert codes == [0, 0], "dlock serve exit statuses %r" % codes

    def setUp(self):
        self.name = self.prefix + self.id().rsplit(".", 1)[-1]
        self.stub = self.service.stub

    def acquire(self, stub=None, **fields):
        fields.setdefault("name", self.name)
        return (stub or self.stub).Acquire(pb.AcquireRequest(**fields), timeout=30)


class ServiceTest(TwoServices):
    """The four calls and HTTP/JSON through the service."""

    def test_grant_returns_owner_fencing_token_and_validity(self):
        grant = self.acquire(ttl_ms=10000)
        self.assertTrue(grant.owner)
        self.assertGreater(grant.fencing_token, 0)
        self.assertGreater(grant.validity_ms, 5000)  # 10 s less a round trip and the drift
        self.assertLessEqual(grant.validity_ms, 10000)
        status = self.stub.Status(pb.StatusRequest(name=self.name), timeout=30)
        self.assertTrue(status.held)
        self.assertEqual(status.quorum, 2)
        self.assertEqual([n.owners[0].owner for n in status.nodes], [grant.owner] * 3)
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=grant.owner), timeout=30)
        again = self.acquire(ttl_ms=10000, owner="caller-named")
        self.assertEqual(again.owner, "caller-named")
        self.assertGreater(again.fencing_token, grant.fencing_token)
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=again.owner), timeout=30)

    def test_held_by_another_is_aborted(self):
        grant = self.acquire(ttl_ms=10000)
        self.assertEqual(code_of(self.acquire, ttl_ms=10000), grpc.StatusCode.ABORTED)
        self.assertEqual(code_of(self.acquire, stub=self.other.stub, ttl_ms=10000),
                         grpc.StatusCode.ABORTED)
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=grant.owner), timeout=30)

    def test_held_says_how_long_the_holder_has_left_on_both_transports(self):
        grant = self.acquire(ttl_ms=10000)
        base = self.other.http + "/v1/locks/" + self.name
        for body in [{"ttl_ms": 1000}, {"ttl_ms": 1000, "wait_ms": 200}]:
            status, refused = curl("POST", base + ":acquire", body)
            self.assertEqual(status, 409, refused)
            self.assertIn("error", refused)
            self.assertGreater(refused["holder_ttl_ms"], 5000)  # 10 s less the time gone
            self.assertLessEqual(refused["holder_ttl_ms"], 10000)
        for wait_ms, code in [(0, grpc.StatusCode.ABORTED),
                              (200, grpc.StatusCode.DEADLINE_EXCEEDED)]:
            with self.assertRaises(grpc.RpcError) as raised:
                self.acquire(stub=self.other.stub, ttl_ms=1000, wait_ms=wait_ms)
            self.assertEqual(raised.exception.code(), code)
            trailers = dict(raised.exception.trailing_metadata())
            self.assertGreater(int(trailers["dlock-holder-ttl-ms"]), 5000)
            self.assertLessEqual(int(trailers["dlock-holder-ttl-ms"]), 10000)
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=grant.owner), timeout=30)

    def test_extend_keeps_the_lock_past_its_first_ttl(self):
        grant = self.acquire(ttl_ms=1500)  # 600 ms is tight for a call on a busy 2-core machine
        extended = self.stub.Extend(
            pb.ExtendRequest(name=self.name, owner=grant.owner, ttl_ms=10000), timeout=30)
        self.assertGreater(extended.validity_ms, 5000)
        self.assertLessEqual(extended.validity_ms, 10000)
        time.sleep(2.5)  # past the first ttl
        self.assertEqual(code_of(self.acquire, ttl_ms=10000), grpc.StatusCode.ABORTED)
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=grant.owner), timeout=30)

    def test_release_with_a_wrong_owner_changes_nothing(self):
        grant = self.acquire(ttl_ms=10000)
        for call, request in [
            (self.stub.Release, pb.ReleaseRequest(name=self.name, owner="intruder")),
            (self.stub.Extend, pb.ExtendRequest(name=self.name, owner="intruder", ttl_ms=1000)),
        ]:
            self.assertEqual(code_of(call, request, timeout=30),
                             grpc.StatusCode.FAILED_PRECONDITION)
        self.assertEqual(code_of(self.acquire, ttl_ms=10000), grpc.StatusCode.ABORTED)
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=grant.owner), timeout=30)
        # Released: the owner's token no longer releases anything, and the name is free.
        self.assertEqual(
            code_of(self.stub.Release, pb.ReleaseRequest(name=self.name, owner=grant.owner),
                    timeout=30), grpc.StatusCode.FAILED_PRECONDITION)
        self.assertTrue(self.acquire(ttl_ms=10000).owner)

    def test_bad_input_is_invalid_argument_and_takes_nothing(self):
        bad = [
            (self.stub.Acquire, pb.AcquireRequest(name="", ttl_ms=1000)),
            (self.stub.Acquire, pb.AcquireRequest(name=self.name, ttl_ms=0)),
            (self.stub.Acquire, pb.AcquireRequest(name=self.name, ttl_ms=-5)),
            (self.stub.Acquire, pb.AcquireRequest(name=self.name, ttl_ms=1000, wait_ms=-1)),
            (self.stub.Extend, pb.ExtendRequest(name=self.name, owner="o", ttl_ms=0)),
            (self.stub.Extend, pb.ExtendRequest(name=self.name, owner="", ttl_ms=1000)),
            (self.stub.Release, pb.ReleaseRequest(name="", owner="o")),
            (self.stub.Release, pb.ReleaseRequest(name=self.name, owner="")),
            (self.stub.Status, pb.StatusRequest(name="")),
        ]
        for call, request in bad:
            with self.subTest(request=str(request)):
                self.assertEqual(code_of(call, request, timeout=30),
                                 grpc.StatusCode.INVALID_ARGUMENT)
        status = self.stub.Status(pb.StatusRequest(name=self.name), timeout=30)
        self.assertFalse(status.held)
        self.assertEqual([n.kind for n in status.nodes], ["free"] * 3)

    def test_a_wait_is_granted_when_the_holder_releases(self):
        holder = self.acquire(ttl_ms=30000)
        waiting = self.stub.Acquire.future(
            pb.AcquireRequest(name=self.name, ttl_ms=10000, wait_ms=20000), timeout=30)
        time.sleep(0.3)
        self.assertFalse(waiting.done())
        started = time.monotonic()
        self.other.stub.Release(pb.ReleaseRequest(name=self.name, owner=holder.owner),
                                timeout=30)
        grant = waiting.result(timeout=30)
        # Woken by the release, long before the holder's 30 s ttl.
        self.assertLess(time.monotonic() - started, 10)
        self.assertGreater(grant.fencing_token, holder.fencing_token)
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=grant.owner), timeout=30)

    def test_a_wait_that_runs_out_is_deadline_exceeded(self):
        holder = self.acquire(ttl_ms=30000)
        started = time.monotonic()
        self.assertEqual(code_of(self.acquire, ttl_ms=1000, wait_ms=500),
                         grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertGreaterEqual(time.monotonic() - started, 0.45)
        # The call's own deadline shortens a longer wait: the service answers before it.
        started = time.monotonic()
        self.assertEqual(
            code_of(self.stub.Acquire,
                    pb.AcquireRequest(name=self.name, ttl_ms=1000, wait_ms=60000), timeout=1.0),
            grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertLess(time.monotonic() - started, 10)
        self.assert_nothing_left_of_waits()
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=holder.owner), timeout=30)

    def test_a_cancelled_wait_leaves_no_queue_place_and_no_subscription(self):
        holder = self.acquire(ttl_ms=30000)
        queue = "dlock:queue:{%s}" % self.name
        for _ in range(3):
            waiting = self.stub.Acquire.future(
                pb.AcquireRequest(name=self.name, ttl_ms=1000, wait_ms=20000, fair=True),
                timeout=30)
            self.assertTrue(wait_until(lambda: self.nodes[0].cli("ZCARD", queue) == "1"),
                            "the fair waiter never queued")
            self.assertTrue(waiting.cancel())
            self.assertTrue(waiting.cancelled())
            self.assert_nothing_left_of_waits()
        # The holder still holds; nothing was granted to the cancelled waiters.
        status = self.stub.Status(pb.StatusRequest(name=self.name), timeout=30)
        self.assertEqual([n.owners[0].owner for n in status.nodes], [holder.owner] * 3)
        # The shared subscription goes too once it lingered 10 s without waiters: the client
        # drops idle channels when a later wait ends (src/lock/waiters.h).
        time.sleep(11)
        other = "%s-other" % self.name
        other_holder = self.acquire(name=other, ttl_ms=30000)
        self.assertEqual(code_of(self.acquire, name=other, ttl_ms=1000, wait_ms=100),
                         grpc.StatusCode.DEADLINE_EXCEEDED)
        channel = "dlock:release:{%s}" % self.name
        for node in self.nodes:
            self.assertTrue(
                wait_until(lambda: node.cli("PUBSUB", "NUMSUB", channel).split()[-1] == "0"),
                "a subscription stayed on port %d" % node.port)
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=holder.owner), timeout=30)
        self.stub.Release(pb.ReleaseRequest(name=other, owner=other_holder.owner), timeout=30)

    def assert_nothing_left_of_waits(self):
        """No queue place, and no subscription of the wait's own: at most the one that the
        service's client shares among all waiters of the name and keeps a while."""
        queue = "dlock:queue:{%s}" % self.name
        channel = "dlock:release:{%s}" % self.name
        for node in self.nodes:
            self.assertTrue(wait_until(lambda: node.cli("ZCARD", queue) == "0"),
                            "a queue place stayed on port %d" % node.port)
            self.assertLessEqual(int(node.cli("PUBSUB", "NUMSUB", channel).split()[-1]), 1,
                                 "subscriptions pile up on port %d" % node.port)

    def test_a_lease_taken_through_one_instance_is_extended_and_released_through_another(self):
        # 3 s, not less: the other instance's first call greets the nodes first, and on a busy
        # machine that took longer than an 800 ms lease (the lease was gone before the extend).
        grant = self.acquire(ttl_ms=3000)
        extended = self.other.stub.Extend(
            pb.ExtendRequest(name=self.name, owner=grant.owner, ttl_ms=10000), timeout=30)
        self.assertGreater(extended.validity_ms, 5000)
        time.sleep(3.5)  # past the first ttl: only the extension through the other keeps it
        self.assertEqual(code_of(self.acquire, stub=self.other.stub, ttl_ms=1000),
                         grpc.StatusCode.ABORTED)
        self.other.stub.Release(pb.ReleaseRequest(name=self.name, owner=grant.owner),
                                timeout=30)
        next_grant = self.acquire(ttl_ms=1000)
        self.assertGreater(next_grant.fencing_token, grant.fencing_token)

    def test_http_acquire_extend_release_and_status(self):
        base = self.service.http + "/v1/locks/" + self.name
        # 3 s, as the gRPC case above: with 32 tests at once on 2 cores a 1.5 s lease was gone
        # before the second curl's extension through the other instance reached the nodes.
        status, grant = curl("POST", base + ":acquire", {"ttl_ms": 3000})
        self.assertEqual(status, 200, grant)
        self.assertTrue(grant["owner"])
        self.assertIsInstance(grant["fencing_token"], str)  # a decimal string: it can pass 2^53
        self.assertGreater(int(grant["fencing_token"]), 0)
        self.assertGreater(grant["validity_ms"], 0)
        status, refused = curl("POST", base + ":acquire", {"ttl_ms": 1000})
        self.assertEqual(status, 409)
        self.assertIn("error", refused)
        other = self.other.http + "/v1/locks/" + self.name
        status, extended = curl("POST", other + ":extend", {"owner": grant["owner"],
                                                            "ttl_ms": 10000})
        self.assertEqual(status, 200, extended)
        self.assertGreater(extended["validity_ms"], 5000)
        time.sleep(3.5)  # past the first ttl
        self.assertEqual(curl("POST", base + ":acquire", {"ttl_ms": 1000})[0], 409)
        self.assertEqual(curl("POST", base + ":release", {"owner": "intruder"})[0], 409)
        self.assertEqual(curl("POST", base + ":extend", {"owner": "intruder"})[0], 409)
        status, held = curl("GET", other)
        self.assertEqual(status, 200)
        self.assertEqual((held["name"], held["held"]), (self.name, True))
        # The same lease through gRPC, the other transport.
        self.other.stub.Release(pb.ReleaseRequest(name=self.name, owner=grant["owner"]),
                                timeout=30)
        status, free = curl("GET", base)
        self.assertEqual((status, free["held"]), (200, False))
        status, again = curl("POST", base + ":acquire", "")  # no body: the default ttl
        self.assertEqual(status, 200, again)
        self.assertGreater(int(again["fencing_token"]), int(grant["fencing_token"]))
        self.assertGreater(again["validity_ms"], 20000)  # the default ttl is 30 s
        self.assertEqual(curl("POST", base + ":release", {"owner": again["owner"]}), (200, {}))

    def test_http_bad_input_and_unknown_paths(self):
        base = self.service.http + "/v1/locks/" + self.name
        for body in ["{", "[1]", {"ttl_ms": 0}, {"ttl_ms": -1}, {"ttl_ms": "5"},
                     {"wait_ms": -1}, {"owner": 7}, {"mode": "ALL"}]:
            with self.subTest(body=body):
                status, answer = curl("POST", base + ":acquire", body)
                self.assertEqual(status, 400)
                self.assertIn("error", answer)
        self.assertEqual(curl("POST", base + ":release", {})[0], 400)  # no owner
        # The modes' own bad input (modes_test.py has what they do).
        for body in [{"mode": "PERMIT"}, {"mode": "PERMIT", "permits": 2, "owner": "o"},
                     {"permits": 2}, {"mode": "SHARED", "fair": True}]:
            with self.subTest(body=body):
                self.assertEqual(curl("POST", base + ":acquire", body)[0], 400)
        self.assertEqual(curl("POST", base + ":acquire", "x" * (70 * 1024))[0], 413)
        self.assertEqual(curl("GET", base + ":acquire")[0], 405)
        self.assertEqual(curl("POST", base + ":steal", {})[0], 404)
        self.assertEqual(curl("GET", self.service.http + "/v1/locks/bad%zz")[0], 400)
        self.assertEqual(curl("GET", base)[1]["held"], False)

    def test_http_percent_encoded_names(self):
        name = self.name + "/a:b c"
        encoded = self.service.http + "/v1/locks/" + urllib.parse.quote(name, safe="")
        status, grant = curl("POST", encoded + ":acquire", {"ttl_ms": 10000})
        self.assertEqual(status, 200, grant)
        status_reply = self.stub.Status(pb.StatusRequest(name=name), timeout=30)
        self.assertTrue(status_reply.held)
        self.assertEqual(curl("POST", encoded + ":release", {"owner": grant["owner"]})[0], 200)

    def test_http_wait_granted_on_release_and_a_client_that_hangs_up_leaves_nothing(self):
        base = self.service.http + "/v1/locks/" + self.name
        holder = self.acquire(ttl_ms=30000)
        result = {}
        waiter = threading.Thread(target=lambda: result.update(
            answer=curl("POST", base + ":acquire", {"ttl_ms": 10000, "wait_ms": 20000})))
        waiter.start()
        time.sleep(0.3)
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=holder.owner), timeout=30)
        waiter.join(30)
        status, grant = result["answer"]
        self.assertEqual(status, 200, grant)
        # curl gives up after 1 s of a 20 s fair wait: the service cancels the wait.
        started = time.monotonic()
        status, _ = curl("POST", base + ":acquire",
                         {"ttl_ms": 1000, "wait_ms": 20000, "fair": True}, max_time=1)
        self.assertEqual(status, 0)  # no answer: curl hung up
        self.assertLess(time.monotonic() - started, 10)
        self.assert_nothing_left_of_waits()
        self.assertEqual(curl("POST", base + ":release", {"owner": grant["owner"]})[0], 200)

    def http_socket(self):
        host, port = self.service.http[len("http://"):].rsplit(":", 1)
        return socket.create_connection((host, int(port)), timeout=30)

    def test_http_pipelined_requests_on_one_connection_are_answered_in_order(self):
        body = json.dumps({"ttl_ms": 10000, "owner": "piped"})
        acquire = ("POST /v1/locks/%s:acquire HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                   "\r\n%s" % (self.name, len(body), body))
        health = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        closing = "GET /v1/locks/%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % (
            self.name)
        with self.http_socket() as s:
            s.sendall((acquire + health + closing).encode())
            received = b""
            while chunk := s.recv(65536):  # the server closes after the third answer
                received += chunk
        answers = received.decode().split("HTTP/1.1 ")[1:]
        self.assertEqual([a.split()[0] for a in answers], ["200", "200", "200"], received)
        self.assertIn('"owner":"piped"', answers[0])
        self.assertTrue(answers[1].endswith("ok\n"))
        self.assertIn('"held":true', answers[2])
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner="piped"), timeout=30)

    def test_http_a_client_that_floods_during_a_wait_is_cut_off_and_its_wait_ends(self):
        holder = self.acquire(ttl_ms=30000)
        body = json.dumps({"ttl_ms": 1000, "wait_ms": 20000, "fair": True})
        with self.http_socket() as s:
            s.sendall(("POST /v1/locks/%s:acquire HTTP/1.1\r\nHost: x\r\nContent-Length: %d"
                       "\r\n\r\n%s" % (self.name, len(body), body)).encode())
            queue = "dlock:queue:{%s}" % self.name
            self.assertTrue(wait_until(lambda: self.nodes[0].cli("ZCARD", queue) == "1"))
            try:
                s.sendall(b"x" * (1024 * 1024))  # far over what may wait its turn
                self.assertEqual(s.recv(65536), b"")  # closed without an answer
            except (ConnectionResetError, BrokenPipeError):
                pass  # closed while we were still sending
        self.assert_nothing_left_of_waits()
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=holder.owner), timeout=30)

    def test_http_health_readiness_and_metrics(self):
        self.assertEqual(curl("GET", self.service.http + "/healthz"), (200, "ok"))
        self.assertEqual(curl("GET", self.service.http + "/readyz"), (200, "ready"))
        self.acquire(ttl_ms=1000)
        status, text = curl("GET", self.service.http + "/metrics")
        self.assertEqual(status, 200)
        self.assertIn("dlock_acquisitions_total", text)

    def scrape(self):
        return scrape(self.service)

    def test_metrics_count_requests_per_endpoint_with_status_and_latency(self):
        acquire_route = 'transport="http",endpoint="POST /v1/locks/{name}:acquire"'
        release_route = 'transport="http",endpoint="POST /v1/locks/{name}:release"'
        grpc_acquire = 'transport="grpc",endpoint="/dlock.v1.Locks/Acquire"'
        grpc_release = 'transport="grpc",endpoint="/dlock.v1.Locks/Release"'
        counted = {
            "dlock_service_requests_total{%s,status=\"200\"}" % acquire_route: 1,
            "dlock_service_requests_total{%s,status=\"409\"}" % acquire_route: 2,
            "dlock_service_requests_total{%s,status=\"200\"}" % release_route: 1,
            'dlock_service_requests_total{transport="http",endpoint="other",status="404"}': 1,
            "dlock_service_requests_total{%s,status=\"OK\"}" % grpc_acquire: 1,
            "dlock_service_requests_total{%s,status=\"ABORTED\"}" % grpc_acquire: 1,
            "dlock_service_requests_total{%s,status=\"OK\"}" % grpc_release: 1,
            "dlock_service_request_seconds_count{%s}" % acquire_route: 3,
            'dlock_service_request_seconds_bucket{%s,le="+Inf"}' % acquire_route: 3,
            "dlock_service_request_seconds_count{%s}" % grpc_acquire: 2,
        }
        before = self.scrape()
        base = self.service.http + "/v1/locks/" + self.name
        status, grant = curl("POST", base + ":acquire", {"ttl_ms": 10000})
        self.assertEqual(status, 200, grant)
        self.assertEqual(curl("POST", base + ":acquire", {"ttl_ms": 1000})[0], 409)
        # A wait of 300 ms that runs out: counted in the histogram's buckets from 0.25 s up.
        self.assertEqual(curl("POST", base + ":acquire", {"ttl_ms": 1000, "wait_ms": 300})[0],
                         409)
        self.assertEqual(curl("POST", base + ":release", {"owner": grant["owner"]})[0], 200)
        self.assertEqual(curl("GET", self.service.http + "/nowhere")[0], 404)
        held = self.acquire(ttl_ms=10000)
        self.assertEqual(code_of(self.acquire, ttl_ms=1000), grpc.StatusCode.ABORTED)
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=held.owner), timeout=30)
        after = self.scrape()
        for series, added in counted.items():
            with self.subTest(series=series):
                self.assertEqual(after.get(series, 0) - before.get(series, 0), added)
        waited = 'dlock_service_request_seconds_bucket{%s,le="0.1"}' % acquire_route
        self.assertLessEqual(after.get(waited, 0) - before.get(waited, 0), 2)  # not the wait
        self.assertGreater(after["dlock_service_request_seconds_sum{%s}" % acquire_route]
                           - before.get("dlock_service_request_seconds_sum{%s}" % acquire_route,
                                        0), 0.3)
        self.assertIn("dlock_acquisitions_total", " ".join(after))  # the library's, beside them


class NoQuorumTest(unittest.TestCase):
    def test_two_of_three_nodes_down_is_unavailable(self):
        nodes = [Redis() for _ in range(3)]
        service = Service([n.url for n in nodes])
        try:
            grant = service.stub.Acquire(pb.AcquireRequest(name="q", ttl_ms=10000), timeout=30)
            nodes[1].kill()
            nodes[2].kill()
            for call, request in [
                (service.stub.Acquire, pb.AcquireRequest(name="q2", ttl_ms=10000)),
                (service.stub.Acquire, pb.AcquireRequest(name="q3", ttl_ms=10000, wait_ms=300)),
                (service.stub.Extend, pb.ExtendRequest(name="q", owner=grant.owner,
                                                       ttl_ms=10000)),
            ]:
                with self.subTest(request=str(request)):
                    self.assertEqual(code_of(call, request, timeout=30),
                                     grpc.StatusCode.UNAVAILABLE)
            self.assertEqual(curl("POST", service.http + "/v1/locks/q4:acquire", {})[0], 503)
            self.assertEqual(curl("GET", service.http + "/readyz")[0], 503)
            self.assertEqual(curl("GET", service.http + "/healthz")[0], 200)
        finally:
            self.assertEqual(service.stop(), 0)
            for n in nodes:
                n.close()


class ShutdownTest(unittest.TestCase):
    def test_sigterm_ends_the_waits_in_flight_and_leaves_the_lock_held(self):
        node = Redis()
        service = Service([node.url])
        try:
            holder = service.stub.Acquire(pb.AcquireRequest(name="s", ttl_ms=30000), timeout=30)
            grpc_wait = service.stub.Acquire.future(
                pb.AcquireRequest(name="s", ttl_ms=1000, wait_ms=60000, fair=True), timeout=60)
            http_wait = {}
            waiter = threading.Thread(target=lambda: http_wait.update(answer=curl(
                "POST", service.http + "/v1/locks/s:acquire",
                {"ttl_ms": 1000, "wait_ms": 60000, "fair": True}, max_time=60)))
            waiter.start()
            self.assertTrue(wait_until(lambda: node.cli("ZCARD", "dlock:queue:{s}") == "2"))
            started = time.monotonic()
            self.assertEqual(service.stop(), 0)
            self.assertLess(time.monotonic() - started, 15)
            self.assertNotEqual(code_of(grpc_wait.result), grpc.StatusCode.OK)
            waiter.join(30)
            self.assertNotEqual(http_wait["answer"][0], 200)
            self.assertTrue(wait_until(lambda: node.cli("ZCARD", "dlock:queue:{s}") == "0"))
            # The holder's lock outlives the service: it is in Redis, not in the instance.
            # The lock key: "dlock" F " " HOLD_ID " " OWNER (docs/protocol.md), the holder's.
            self.assertTrue(lock_held_by(node.cli("GET", "s"), holder.owner))
        finally:
            service.stop()
            node.close()


class FlagsTest(unittest.TestCase):
    def run_serve(self, *flags):
        return subprocess.run([DLOCK, "serve", "-r", "redis://127.0.0.1:1"] + list(flags),
                              capture_output=True, text=True, timeout=30)

    def test_security_flags_that_cannot_be_served_are_refused_rather_than_ignored(self):
        # TLS and tokens are served now (security_test.py); what cannot be served as asked is
        # refused at start, never served without the TLS or the tokens the operator wanted.
        for flags, says in [
            (["--tokens", "/dev/null"], "no token"),
            (["--tls-cert", "c.pem", "--tls-key", "k.pem"], "--tls-cert: cannot read c.pem"),
            (["--tls-cert", "c.pem"], "--tls-cert and --tls-key go together"),
            (["--tls-key", "k.pem"], "--tls-cert and --tls-key go together"),
            (["--tls-client-ca", "ca.pem"], "--tls-client-ca needs --tls-cert"),
            (["--tls-cert", "/dev/null", "--tls-key", "/dev/null"], "--tls-cert /dev/null"),
        ]:
            with self.subTest(flags=flags):
                r = self.run_serve(*flags)
                self.assertEqual(r.returncode, 64)
                self.assertIn(says, r.stderr)

    def test_bad_or_no_listeners_are_usage_errors_and_a_port_in_use_is_69(self):
        self.assertEqual(self.run_serve("--grpc-listen", "off", "--http-listen", "off")
                         .returncode, 64)
        self.assertEqual(self.run_serve("--grpc-listen", "7700").returncode, 64)
        self.assertEqual(self.run_serve("--http-listen", "localhost:x").returncode, 64)
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            r = self.run_serve("--grpc-listen", "off", "--http-listen", "127.0.0.1:%d" % port)
            self.assertEqual(r.returncode, 69, r.stderr)
        # A second instance on a running one's gRPC port fails, rather than share it.
        node = Redis()
        first = Service([node.url])
        try:
            r = self.run_serve("--grpc-listen", first.address, "--http-listen", "off")
            self.assertEqual(r.returncode, 69, r.stderr)
        finally:
            first.stop()
            node.close()


class ReflectionTest(unittest.TestCase):
    def test_reflection_lists_the_locks_service(self):
        # The reflection protocol by hand (python3-grpcio has no reflection client): a
        # ServerReflectionRequest with list_services = "" is field 7, an empty string.
        node = Redis()
        service = Service([node.url])
        try:
            call = service.channel.stream_stream(
                "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                request_serializer=lambda b: b, response_deserializer=lambda b: b)
            replies = list(call(iter([b"\x3a\x00"]), timeout=30))
            self.assertEqual(len(replies), 1)
            self.assertIn(b"dlock.v1.Locks", replies[0])
        finally:
            self.assertEqual(service.stop(), 0)
            node.close()


if __name__ == "__main__":
    try:
        unittest.main(verbosity=2)
    finally:
        shutil.rmtree(_stubs, ignore_errors=True)
