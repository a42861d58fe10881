# SPDX-License-Identifier: MIT
"""The lock service's security and limits end to end (docs/service.md, "Security and limits"):
bearer tokens and their name prefixes, the limits on names, ttls, waits, concurrent waits and
request sizes, each refusal with its status and nothing left behind in Redis; real
redis-server and `dlock serve` processes, Debian's python3-grpcio and curl as clients.

Usage: /usr/bin/python3 security_test.py DLOCK_BINARY PROTO_DIR [unittest arguments]
The servers, ports and generated stubs are service_test.py's.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import service_test as st  # noqa: E402 (reads DLOCK_BINARY and PROTO_DIR from sys.argv)
from service_test import Redis, code_of, grpc, pb, pb_grpc, wait_until  # noqa: E402

JOBS = "jobs-token-5f0c2b7e91d4a836"  # allowed jobs/ only
ADMIN = "admin-token-0d9e8f7a6b5c4d3e"  # allowed every name
TOKEN_FILE = """# dlock serve --tokens: TOKEN PREFIX...
%s jobs/
%s\t*
""" % (JOBS, ADMIN)


def bearer(token):
    return [("authorization", "Bearer " + token)] if token else []


class SecureService:
    """A `dlock serve` with `flags` in front of `redis_urls`; its stderr kept in a file, so a
    test can check what it says (and that it never says a token)."""

    def __init__(self, redis_urls, flags, credentials=None, scheme="http"):
        args = [st.DLOCK, "serve", "--grpc-listen", "127.0.0.1:0", "--http-listen",
                "127.0.0.1:0"] + list(flags)
        for url in redis_urls:
            args += ["-r", url]
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True)
        lines = [self.proc.stdout.readline(), self.proc.stdout.readline()]
        if not (lines[0].startswith("dlock serve: grpc ") and
                lines[1].startswith("dlock serve: http ")):
            self.proc.kill()
            raise RuntimeError("dlock serve did not start: %r %s" % (lines, self.said()))
        self.address = lines[0].split()[-1]
        self.http = scheme + "://" + lines[1].split()[-1]
        self.channel = (grpc.secure_channel(self.address, credentials) if credentials
                        else grpc.insecure_channel(self.address))
        self.stub = pb_grpc.LocksStub(self.channel)

    def said(self):
        # pread, never seek: the service writes through the same open file (one offset), so a
        # seek(0) here could send a line it writes meanwhile to offset 0, over earlier ones
        # (seen as a lost SIGHUP message on a loaded machine).
        fd = self.stderr.fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode("utf-8", "replace")

    def stop(self):
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        return self.proc.returncode


def curl(method, url, body=None, token=None, max_time=30, extra=()):
    """(HTTP status, the JSON body or the text) of one request made with curl; status 0 when
    curl got no HTTP answer."""
    args = ["curl", "-s", "-X", method, "--max-time", str(max_time), "-w", "\n%{http_code}",
            url] + list(extra)
    if token:
        args += ["-H", "Authorization: Bearer " + token]
    if body is not None:
        args += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
    r = subprocess.run(args, input=body if isinstance(body, str) else json.dumps(body),
                       capture_output=True, text=True)
    text, _, status = r.stdout.rpartition("\n")
    try:
        return int(status), json.loads(text)
    except ValueError:
        return int(status or 0), text.strip()


class Base(unittest.TestCase):
    """One Redis node and one service with `flags()`; each test on a name of its own."""

    @classmethod
    def flags(cls, tokens_path):
        return []

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="dlock-security-test-")
        cls.tokens_path = os.path.join(cls.dir, "tokens")
        with open(cls.tokens_path, "w") as f:
            f.write(TOKEN_FILE)
        cls.node = Redis()
        cls.service = cls.start_service()

    @classmethod
    def start_service(cls):
        return SecureService([cls.node.url], cls.flags(cls.tokens_path))

    @classmethod
    def tearDownClass(cls):
        code = cls.service.stop()
        said = cls.service.said()
        cls.node.close()
        shutil.rmtree(cls.dir, ignore_errors=True)
        assert code == 0, "dlock serve exit status %r: %s" % (code, said)
        for token in (JOBS, ADMIN):
            assert token not in said, "dlock serve printed a token: %s" % said

    def setUp(self):
        self.name = "jobs/" + self.id().rsplit(".", 1)[-1]
        self.stub = self.service.stub

    def url(self, name=None, verb=""):
        return (self.service.http + "/v1/locks/" +
                urllib.parse.quote(name or self.name, safe="") + verb)

    def assert_left_nothing(self, name=None):
        """The name is free and has no queue place: nothing of a refused call stays."""
        name = name or self.name
        self.assertEqual(self.node.cli("EXISTS", name), "0", name)
        self.assertTrue(wait_until(
            lambda: self.node.cli("ZCARD", "dlock:queue:{%s}" % name) == "0"), name)


class TokensTest(Base):
    @classmethod
    def flags(cls, tokens_path):
        return ["--tokens", tokens_path]

    def calls(self, name, owner="o"):
        return [
            (self.stub.Acquire, pb.AcquireRequest(name=name, ttl_ms=10000)),
            (self.stub.Acquire, pb.AcquireRequest(name=name, ttl_ms=10000, wait_ms=1000,
                                                  fair=True)),
            (self.stub.Extend, pb.ExtendRequest(name=name, owner=owner, ttl_ms=10000)),
            (self.stub.Release, pb.ReleaseRequest(name=name, owner=owner)),
            (self.stub.Status, pb.StatusRequest(name=name)),
            # A stream: its first event, or the refusal that ends it.
            (lambda request, **kw: next(self.stub.Watch(request, **kw)),
             pb.WatchRequest(name=name)),
        ]

    def test_grpc_without_a_known_token_is_unauthenticated_on_every_call(self):
        for metadata in [[], bearer("wrong-token-0123456789abc"), bearer(JOBS[:-1]),
                         [("authorization", "Basic " + JOBS)]]:
            for call, request in self.calls(self.name):
                with self.subTest(metadata=metadata, request=str(request)):
                    self.assertEqual(code_of(call, request, timeout=30, metadata=metadata),
                                     grpc.StatusCode.UNAUTHENTICATED)
        self.assert_left_nothing()
        grant = self.stub.Acquire(pb.AcquireRequest(name=self.name, ttl_ms=10000), timeout=30,
                                  metadata=bearer(JOBS))
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=grant.owner), timeout=30,
                          metadata=bearer(JOBS))

    def test_http_without_a_known_token_is_401_and_the_probes_stay_open(self):
        for token in [None, "wrong-token-0123456789abc"]:
            for method, verb, body in [("POST", ":acquire", {"ttl_ms": 10000}),
                                       ("POST", ":acquire", {"wait_ms": 1000, "fair": True}),
                                       ("POST", ":extend", {"owner": "o"}),
                                       ("POST", ":release", {"owner": "o"}),
                                       ("GET", "", None)]:
                with self.subTest(token=token, verb=verb):
                    status, answer = curl(method, self.url(verb=verb), body, token=token)
                    self.assertEqual(status, 401, answer)
                    self.assertIn("error", answer)
            self.assertEqual(curl("GET", self.service.http + "/metrics", token=token)[0], 401)
        self.assert_left_nothing()
        self.assertEqual(curl("GET", self.service.http + "/healthz"), (200, "ok"))
        self.assertEqual(curl("GET", self.service.http + "/readyz"), (200, "ready"))
        status, text = curl("GET", self.service.http + "/metrics", token=JOBS)
        self.assertEqual(status, 200)
        self.assertIn("dlock_", text)
        # RFC 6750: a 401 says which scheme it wants.
        r = subprocess.run(["curl", "-s", "-i", self.url()], capture_output=True, text=True)
        self.assertIn('www-authenticate: bearer realm="dlock"', r.stdout.lower())

    def test_a_jobs_token_takes_jobs_names_only_on_grpc(self):
        jobs = bearer(JOBS)
        grant = self.stub.Acquire(pb.AcquireRequest(name=self.name, ttl_ms=10000), timeout=30,
                                  metadata=jobs)
        self.assertGreater(grant.fencing_token, 0)
        other = "other-" + self.name
        for call, request in self.calls(other, owner=grant.owner):
            with self.subTest(request=str(request)):
                self.assertEqual(code_of(call, request, timeout=30, metadata=jobs),
                                 grpc.StatusCode.PERMISSION_DENIED)
        self.assert_left_nothing(other)
        # Another token's lock outside jobs/ is out of reach too: it stays held.
        held = self.stub.Acquire(pb.AcquireRequest(name=other, ttl_ms=10000), timeout=30,
                                 metadata=bearer(ADMIN))
        self.assertEqual(code_of(self.stub.Release, pb.ReleaseRequest(name=other,
                                                                      owner=held.owner),
                                 timeout=30, metadata=jobs), grpc.StatusCode.PERMISSION_DENIED)
        self.assertTrue(st.lock_held_by(self.node.cli("GET", other), held.owner))
        self.stub.Release(pb.ReleaseRequest(name=other, owner=held.owner), timeout=30,
                          metadata=bearer(ADMIN))
        status = self.stub.Status(pb.StatusRequest(name=self.name), timeout=30, metadata=jobs)
        self.assertTrue(status.held)
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=grant.owner), timeout=30,
                          metadata=jobs)
        self.assert_left_nothing()

    def test_a_jobs_token_takes_jobs_names_only_on_http(self):
        status, grant = curl("POST", self.url(verb=":acquire"), {"ttl_ms": 10000}, token=JOBS)
        self.assertEqual(status, 200, grant)
        other = "other-" + self.name
        for method, verb, body in [("POST", ":acquire", {"ttl_ms": 10000}),
                                   ("POST", ":acquire", {"wait_ms": 1000, "fair": True}),
                                   ("POST", ":extend", {"owner": grant["owner"]}),
                                   ("POST", ":release", {"owner": grant["owner"]}),
                                   ("GET", "", None)]:
            with self.subTest(verb=verb):
                status, answer = curl(method, self.url(other, verb), body, token=JOBS)
                self.assertEqual(status, 403, answer)
                self.assertIn("error", answer)
        self.assert_left_nothing(other)
        self.assertEqual(curl("GET", self.url(), token=JOBS)[1]["held"], True)
        self.assertEqual(curl("POST", self.url(verb=":release"), {"owner": grant["owner"]},
                              token=JOBS), (200, {}))
        self.assert_left_nothing()


class RenewalGuardTest(Base):
    """KeepAlive and POST /v1/leases:renew pass the guard for every lease of a set, as an Extend
    of it would: a set with one lease the caller may not renew renews nothing."""

    @classmethod
    def flags(cls, tokens_path):
        return ["--tokens", tokens_path, "--max-ttl", "30s"]

    def keepalive_error(self, leases, token):
        """The status a KeepAlive stream ends with after one request naming `leases`."""
        request = pb.KeepAliveRequest(leases=leases)
        try:
            for _ in self.stub.KeepAlive(iter([request]), timeout=30, metadata=bearer(token)):
                pass
        except grpc.RpcError as e:
            return e.code()
        return grpc.StatusCode.OK

    def test_a_keepalive_set_is_checked_lease_by_lease_and_renews_nothing_when_refused(self):
        other = "other-" + self.name
        held = self.stub.Acquire(pb.AcquireRequest(name=other, ttl_ms=10000), timeout=30,
                                 metadata=bearer(ADMIN))
        mine = self.stub.Acquire(pb.AcquireRequest(name=self.name, ttl_ms=10000), timeout=30,
                                 metadata=bearer(JOBS))
        ok = pb.LeaseRef(name=self.name, owner=mine.owner, ttl_ms=20000)
        for leases, token, code in [
                ([ok], None, grpc.StatusCode.UNAUTHENTICATED),
                ([ok], "wrong-token-0123456789abc", grpc.StatusCode.UNAUTHENTICATED),
                ([ok, pb.LeaseRef(name=other, owner=held.owner, ttl_ms=20000)], JOBS,
                 grpc.StatusCode.PERMISSION_DENIED),
                ([pb.LeaseRef(name=self.name, owner=mine.owner, ttl_ms=60000)], JOBS,
                 grpc.StatusCode.INVALID_ARGUMENT)]:
            with self.subTest(leases=str(leases), token=token):
                self.assertEqual(self.keepalive_error(leases, token), code)
        # Nothing of the refused sets was renewed: both ttls are still at most their first 10 s.
        for name in (self.name, other):
            self.assertLessEqual(int(self.node.cli("PTTL", name)), 10000, name)
        self.stub.Release(pb.ReleaseRequest(name=other, owner=held.owner), timeout=30,
                          metadata=bearer(ADMIN))
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=mine.owner), timeout=30,
                          metadata=bearer(JOBS))

    def test_http_renew_is_checked_lease_by_lease(self):
        other = "other-" + self.name
        status, held = curl("POST", self.url(other, ":acquire"), {"ttl_ms": 10000}, token=ADMIN)
        self.assertEqual(status, 200, held)
        status, mine = curl("POST", self.url(verb=":acquire"), {"ttl_ms": 10000}, token=JOBS)
        self.assertEqual(status, 200, mine)
        renew = self.service.http + "/v1/leases:renew"
        ok = {"name": self.name, "owner": mine["owner"], "ttl_ms": 20000}
        for leases, token, expected in [
                ([ok], None, 401),
                ([ok, {"name": other, "owner": held["owner"], "ttl_ms": 20000}], JOBS, 403),
                ([dict(ok, ttl_ms=60000)], JOBS, 400)]:
            with self.subTest(leases=leases, token=token):
                status, answer = curl("POST", renew, {"leases": leases}, token=token)
                self.assertEqual(status, expected, answer)
        for name in (self.name, other):
            self.assertLessEqual(int(self.node.cli("PTTL", name)), 10000, name)
        status, answer = curl("POST", renew, {"leases": [ok]}, token=JOBS)
        self.assertEqual(status, 200, answer)
        self.assertGreater(int(self.node.cli("PTTL", self.name)), 10000)
        curl("POST", self.url(other, ":release"), {"owner": held["owner"]}, token=ADMIN)
        curl("POST", self.url(verb=":release"), {"owner": mine["owner"]}, token=JOBS)
        self.assert_left_nothing()


class LimitsTest(Base):
    """Limits with tokens: --max-ttl 30s, --max-wait 20s, --max-waits 2."""

    @classmethod
    def flags(cls, tokens_path):
        return ["--tokens", tokens_path, "--max-ttl", "30s", "--max-wait", "20s",
                "--max-waits", "2"]

    def acquire(self, token=JOBS, **fields):
        fields.setdefault("name", self.name)
        return self.stub.Acquire(pb.AcquireRequest(**fields), timeout=30,
                                 metadata=bearer(token))

    def test_names_over_512_bytes_are_invalid_and_take_nothing(self):
        long_name = self.name + "x" * (513 - len(self.name))
        jobs = bearer(JOBS)
        for call, request in [
            (self.stub.Acquire, pb.AcquireRequest(name=long_name, ttl_ms=1000)),
            (self.stub.Acquire, pb.AcquireRequest(name=long_name, ttl_ms=1000, wait_ms=100)),
            (self.stub.Extend, pb.ExtendRequest(name=long_name, owner="o", ttl_ms=1000)),
            (self.stub.Release, pb.ReleaseRequest(name=long_name, owner="o")),
            (self.stub.Status, pb.StatusRequest(name=long_name)),
        ]:
            with self.subTest(request=type(request).__name__):
                self.assertEqual(code_of(call, request, timeout=30, metadata=jobs),
                                 grpc.StatusCode.INVALID_ARGUMENT)
        status, answer = curl("POST", self.url(long_name, ":acquire"), {}, token=JOBS)
        self.assertEqual(status, 400, answer)
        self.assertIn("512", answer["error"])
        self.assert_left_nothing(long_name)
        # 512 bytes is allowed.
        name = long_name[:512]
        grant = self.acquire(name=name, ttl_ms=1000)
        self.stub.Release(pb.ReleaseRequest(name=name, owner=grant.owner), timeout=30,
                          metadata=jobs)
        self.assert_left_nothing(name)

    def test_a_ttl_over_the_maximum_is_invalid_and_changes_nothing(self):
        self.assertEqual(code_of(self.acquire, ttl_ms=30001), grpc.StatusCode.INVALID_ARGUMENT)
        status, answer = curl("POST", self.url(verb=":acquire"), {"ttl_ms": 30001}, token=JOBS)
        self.assertEqual(status, 400, answer)
        self.assertIn("--max-ttl", answer["error"])
        self.assert_left_nothing()
        grant = self.acquire(ttl_ms=30000)  # the maximum itself is allowed
        pttl = int(self.node.cli("PTTL", self.name))
        self.assertEqual(
            code_of(self.stub.Extend, pb.ExtendRequest(name=self.name, owner=grant.owner,
                                                       ttl_ms=60000),
                    timeout=30, metadata=bearer(JOBS)), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(curl("POST", self.url(verb=":extend"),
                              {"owner": grant.owner, "ttl_ms": 60000}, token=JOBS)[0], 400)
        self.assertLessEqual(int(self.node.cli("PTTL", self.name)), pttl)  # not extended
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=grant.owner), timeout=30,
                          metadata=bearer(JOBS))
        self.assert_left_nothing()

    def test_a_wait_over_the_maximum_is_invalid_and_queues_nothing(self):
        holder = self.acquire(ttl_ms=30000)
        self.assertEqual(code_of(self.acquire, ttl_ms=1000, wait_ms=20001, fair=True),
                         grpc.StatusCode.INVALID_ARGUMENT)
        status, answer = curl("POST", self.url(verb=":acquire"),
                              {"wait_ms": 20001, "fair": True}, token=JOBS)
        self.assertEqual(status, 400, answer)
        self.assertIn("--max-wait", answer["error"])
        self.assertEqual(self.node.cli("ZCARD", "dlock:queue:{%s}" % self.name), "0")
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=holder.owner), timeout=30,
                          metadata=bearer(JOBS))
        self.assert_left_nothing()

    def test_a_token_over_its_concurrent_waits_is_refused_retryably_and_the_others_wait_on(self):
        holder = self.acquire(ttl_ms=30000, token=ADMIN)
        queue = "dlock:queue:{%s}" % self.name
        waits = []
        for queued in ["1", "2"]:  # one after the other: the fair queue grants in this order
            waits.append(self.stub.Acquire.future(
                pb.AcquireRequest(name=self.name, ttl_ms=30000, wait_ms=20000, fair=True),
                timeout=30, metadata=bearer(JOBS)))
            self.assertTrue(wait_until(lambda: self.node.cli("ZCARD", queue) == queued))
        # The third wait of the same token, on either transport: refused, queued nowhere.
        self.assertEqual(code_of(self.acquire, ttl_ms=1000, wait_ms=1000, fair=True),
                         grpc.StatusCode.RESOURCE_EXHAUSTED)
        status, answer = curl("POST", self.url(verb=":acquire"),
                              {"wait_ms": 1000, "fair": True}, token=JOBS)
        self.assertEqual(status, 429, answer)
        self.assertEqual(self.node.cli("ZCARD", queue), "2")
        # A try takes no place, and another token has places of its own.
        self.assertEqual(code_of(self.acquire, ttl_ms=1000), grpc.StatusCode.ABORTED)
        self.assertEqual(code_of(self.acquire, token=ADMIN, ttl_ms=1000, wait_ms=100),
                         grpc.StatusCode.DEADLINE_EXCEEDED)
        # The two waits were never disturbed: each is granted in turn.
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=holder.owner), timeout=30,
                          metadata=bearer(ADMIN))
        first = waits[0].result(timeout=30)
        self.assertFalse(waits[1].done())
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=first.owner), timeout=30,
                          metadata=bearer(JOBS))
        second = waits[1].result(timeout=30)
        self.assertGreater(second.fencing_token, first.fencing_token)
        # Places given back: the token waits again.
        again = self.stub.Acquire.future(
            pb.AcquireRequest(name=self.name, ttl_ms=1000, wait_ms=20000), timeout=30,
            metadata=bearer(JOBS))
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=second.owner), timeout=30,
                          metadata=bearer(JOBS))
        grant = again.result(timeout=30)
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=grant.owner), timeout=30,
                          metadata=bearer(JOBS))
        self.assert_left_nothing()

    def test_oversized_requests_are_refused_on_both_transports(self):
        status, answer = curl("POST", self.url(verb=":acquire"), "x" * (70 * 1024), token=JOBS)
        self.assertEqual(status, 413, answer)
        self.assertEqual(
            code_of(self.acquire, ttl_ms=1000, owner="o" * (70 * 1024)),
            grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assert_left_nothing()
        # The service serves on.
        grant = self.acquire(ttl_ms=1000)
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=grant.owner), timeout=30,
                          metadata=bearer(JOBS))


class CallerWaitsTest(Base):
    """Without tokens, waits count per client address, on both transports together; and a
    --max-ttl under the default ttl (30 s)."""

    @classmethod
    def flags(cls, tokens_path):
        return ["--max-waits", "1", "--max-ttl", "10s"]

    def test_under_a_max_ttl_below_the_default_a_call_must_name_its_ttl(self):
        self.assertEqual(code_of(self.stub.Acquire, pb.AcquireRequest(name=self.name),
                                 timeout=30), grpc.StatusCode.INVALID_ARGUMENT)
        status, answer = curl("POST", self.url(verb=":acquire"), "")
        self.assertEqual(status, 400, answer)
        self.assertIn("--max-ttl", answer["error"])
        grant = self.stub.Acquire(pb.AcquireRequest(name=self.name, ttl_ms=10000), timeout=30)
        self.assertEqual(code_of(self.stub.Extend, pb.ExtendRequest(name=self.name,
                                                                    owner=grant.owner),
                                 timeout=30), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(curl("POST", self.url(verb=":extend"), {"owner": grant.owner})[0], 400)
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=grant.owner), timeout=30)
        self.assert_left_nothing()

    def test_an_address_over_its_concurrent_waits_is_refused_on_either_transport(self):
        holder = self.stub.Acquire(pb.AcquireRequest(name=self.name, ttl_ms=10000), timeout=30)
        waiting = self.stub.Acquire.future(
            pb.AcquireRequest(name=self.name, ttl_ms=1000, wait_ms=20000, fair=True),
            timeout=30)
        queue = "dlock:queue:{%s}" % self.name
        self.assertTrue(wait_until(lambda: self.node.cli("ZCARD", queue) == "1"))
        self.assertEqual(code_of(self.stub.Acquire, pb.AcquireRequest(
            name=self.name, ttl_ms=1000, wait_ms=1000), timeout=30),
            grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertEqual(curl("POST", self.url(verb=":acquire"),
                              {"ttl_ms": 1000, "wait_ms": 1000})[0], 429)
        self.assertEqual(self.node.cli("ZCARD", queue), "1")
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=holder.owner), timeout=30)
        grant = waiting.result(timeout=30)
        self.stub.Release(pb.ReleaseRequest(name=self.name, owner=grant.owner), timeout=30)
        self.assert_left_nothing()


def make_certificates(d, ec=True):
    """A CA, a server certificate for 127.0.0.1 and localhost, a client certificate signed by
    the CA and one signed by an unrelated CA, in `d`: made with the openssl command, as
    tests/integration/tls_auth_test.cc makes them for rediss://. P-256 keys (12 ms of CPU
    each), or without `ec` RSA ones (some 300 ms each): TlsTest keeps RSA, so the service's
    listeners serve both kinds."""
    newkey = "ec -pkeyopt ec_paramgen_curve:prime256v1" if ec else "rsa:2048"
    subprocess.run(["sh", "-c", """set -e
        openssl req -x509 -newkey $newkey -nodes -keyout ca.key -out ca.crt -days 2 \
            -subj '/CN=dlock test CA' 2>/dev/null
        openssl req -x509 -newkey $newkey -nodes -keyout other-ca.key -out other-ca.crt \
            -days 2 -subj '/CN=unrelated CA' 2>/dev/null
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.cnf
        openssl req -newkey $newkey -nodes -keyout server.key -out server.csr \
            -subj '/CN=127.0.0.1' 2>/dev/null
        openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
            -out server.crt -days 2 -extfile san.cnf 2>/dev/null
        for who in client:ca stranger:other-ca; do
            name=${who%%:*}; ca=${who#*:}
            openssl req -newkey $newkey -nodes -keyout $name.key -out $name.csr \
                -subj "/CN=dlock $name" 2>/dev/null
            openssl x509 -req -in $name.csr -CA $ca.crt -CAkey $ca.key -CAcreateserial \
                -out $name.crt -days 2 2>/dev/null
        done"""], cwd=d, check=True, env=dict(os.environ, newkey=newkey))


def read(path):
    with open(path, "rb") as f:
        return f.read()


class TlsBase(Base):
    """A service over TLS on both listeners; `client_ca` adds --tls-client-ca (mutual TLS);
    `rsa` RSA keys instead of P-256 ones."""
    client_ca = False
    rsa = False

    @classmethod
    def setUpClass(cls):
        cls.certs = tempfile.mkdtemp(prefix="dlock-security-certs-")
        make_certificates(cls.certs, ec=not cls.rsa)
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.certs, ignore_errors=True)

    @classmethod
    def cert(cls, name):
        return os.path.join(cls.certs, name)

    @classmethod
    def flags(cls, tokens_path):
        flags = ["--tls-cert", cls.cert("server.crt"), "--tls-key", cls.cert("server.key")]
        return flags + (["--tls-client-ca", cls.cert("ca.crt")] if cls.client_ca else [])

    @classmethod
    def start_service(cls):
        return SecureService([cls.node.url], cls.flags(cls.tokens_path),
                             credentials=cls.credentials("client"), scheme="https")

    @classmethod
    def credentials(cls, client=None):
        """gRPC channel credentials that trust the test CA, with `client`'s certificate."""
        if client is None:
            return grpc.ssl_channel_credentials(root_certificates=read(cls.cert("ca.crt")))
        return grpc.ssl_channel_credentials(
            root_certificates=read(cls.cert("ca.crt")),
            private_key=read(cls.cert(client + ".key")),
            certificate_chain=read(cls.cert(client + ".crt")))

    def curl_tls(self, method, url, body=None, client=None):
        extra = ["--cacert", self.cert("ca.crt")]
        if client:
            extra += ["--cert", self.cert(client + ".crt"), "--key", self.cert(client + ".key")]
        return curl(method, url, body, extra=extra)

    def grant_on_both_transports(self, client):
        """A grant over TLS through gRPC and through HTTP, released again."""
        with grpc.secure_channel(self.service.address, self.credentials(client)) as channel:
            stub = pb_grpc.LocksStub(channel)
            grant = stub.Acquire(pb.AcquireRequest(name=self.name, ttl_ms=10000), timeout=30)
            self.assertGreater(grant.fencing_token, 0)
            self.assertTrue(st.lock_held_by(self.node.cli("GET", self.name), grant.owner))
            stub.Release(pb.ReleaseRequest(name=self.name, owner=grant.owner), timeout=30)
        status, answer = self.curl_tls("POST", self.url(verb=":acquire"), {"ttl_ms": 10000},
                                       client=client)
        self.assertEqual(status, 200, answer)
        self.assertGreater(int(answer["fencing_token"]), grant.fencing_token)
        self.assertEqual(self.curl_tls("POST", self.url(verb=":release"),
                                       {"owner": answer["owner"]}, client=client), (200, {}))
        self.assert_left_nothing()

    def assert_refused(self, credentials, curl_extra, scheme="https"):
        """A gRPC channel with `credentials` (None: in the clear) and a curl with `curl_extra`
        to `scheme`://... get no answer from the service, and nothing is taken."""
        channel = (grpc.secure_channel(self.service.address, credentials) if credentials
                   else grpc.insecure_channel(self.service.address))
        with channel:
            stub = pb_grpc.LocksStub(channel)
            self.assertEqual(code_of(stub.Acquire, pb.AcquireRequest(name=self.name,
                                                                     ttl_ms=10000),
                                     timeout=10), grpc.StatusCode.UNAVAILABLE)
        url = scheme + self.url(verb=":acquire")[len("https"):]
        status, answer = curl("POST", url, {"ttl_ms": 10000}, max_time=10, extra=curl_extra)
        self.assertEqual(status, 0, answer)  # no HTTP answer at all
        self.assert_left_nothing()


class TlsTest(TlsBase):
    rsa = True

    def test_a_grant_over_tls_on_both_transports(self):
        self.grant_on_both_transports(client=None)

    def test_a_client_in_the_clear_is_refused_on_both_transports(self):
        self.assert_refused(None, [], scheme="http")
        # A client that does not trust the service's certificate refuses it itself.
        self.assert_refused(grpc.ssl_channel_credentials(
            root_certificates=read(self.cert("other-ca.crt"))), [])
        self.assertEqual(curl("GET", self.service.http + "/healthz",
                              extra=["--cacert", self.cert("ca.crt")]), (200, "ok"))


class MutualTlsTest(TlsBase):
    client_ca = True

    def test_a_client_with_a_certificate_of_the_ca_is_served(self):
        self.grant_on_both_transports(client="client")

    def test_a_client_without_a_certificate_of_the_ca_is_refused(self):
        self.assert_refused(self.credentials(None), ["--cacert", self.cert("ca.crt")])
        stranger = ["--cacert", self.cert("ca.crt"), "--cert", self.cert("stranger.crt"),
                    "--key", self.cert("stranger.key")]
        self.assert_refused(self.credentials("stranger"), stranger)
        # The service serves on, to those it knows.
        self.assertEqual(self.curl_tls("GET", self.service.http + "/healthz", client="client"),
                         (200, "ok"))


class SecurityFlagsTest(unittest.TestCase):
    def run_serve(self, *flags):
        return subprocess.run([st.DLOCK, "serve", "-r", "redis://127.0.0.1:1"] + list(flags),
                              capture_output=True, text=True, timeout=30)

    def test_bad_token_files_and_limits_are_usage_errors_that_name_the_line(self):
        with tempfile.TemporaryDirectory() as d:
            def tokens(text):
                path = os.path.join(d, "tokens")
                with open(path, "w") as f:
                    f.write(text)
                return path
            for text, says in [
                ("", "no token"),
                ("# nothing\n", "no token"),
                ("%s jobs/\nsecret-short x\n" % JOBS, ":2: "),
                ("\n%s\n" % JOBS, ":2: a token without a name prefix"),
                ("%s jobs/\n%s other/\n" % (JOBS, JOBS), ":2: the same token"),
            ]:
                with self.subTest(text=text):
                    r = self.run_serve("--tokens", tokens(text))
                    self.assertEqual(r.returncode, 64, r.stderr)
                    self.assertIn(says, r.stderr)
                    self.assertNotIn(JOBS, r.stderr)
                    self.assertNotIn("secret-short", r.stderr)
        for flags in [["--tokens", "/nonexistent/tokens"], ["--max-ttl", "0"],
                      ["--max-wait", "soon"], ["--max-waits", "0"]]:
            with self.subTest(flags=flags):
                r = self.run_serve(*flags)
                self.assertEqual(r.returncode, 64, r.stderr)
                self.assertIn(flags[0], r.stderr)


class TlsFlagsTest(unittest.TestCase):
    def test_bad_tls_files_are_usage_errors_that_name_the_flag_and_file(self):
        with tempfile.TemporaryDirectory() as d:
            make_certificates(d)
            crt, key = os.path.join(d, "server.crt"), os.path.join(d, "server.key")
            for flags, says in [
                (["--tls-cert", crt], "--tls-cert and --tls-key go together"),
                (["--tls-cert", crt, "--tls-key", os.path.join(d, "client.key")],
                 "--tls-key %s: key values mismatch" % os.path.join(d, "client.key")),
                (["--tls-cert", key, "--tls-key", key], "--tls-cert " + key),
                (["--tls-cert", crt, "--tls-key", crt], "--tls-key " + crt),
                (["--tls-cert", crt, "--tls-key", key, "--tls-client-ca", d + "/none"],
                 "--tls-client-ca: cannot read"),
                (["--tls-cert", crt, "--tls-key", key, "--tls-client-ca", key],
                 "--tls-client-ca " + key),
            ]:
                with self.subTest(flags=flags):
                    r = subprocess.run([st.DLOCK, "serve", "-r", "redis://127.0.0.1:1"] + flags,
                                       capture_output=True, text=True, timeout=30)
                    self.assertEqual(r.returncode, 64, r.stderr)
                    self.assertIn(says, r.stderr)


if __name__ == "__main__":
    try:
        unittest.main(verbosity=2)
    finally:
        shutil.rmtree(st._stubs, ignore_errors=True)
