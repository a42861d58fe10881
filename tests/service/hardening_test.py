# SPDX-License-Identifier: MIT
"""The lock service's hardening end to end (docs/service.md, "Connections", "Reloading tokens
and certificates", "Access log", "Stopping"): the HTTP connection limit and idle timeout, the
gRPC handshake timeout, tokens and certificates read again on SIGHUP, the access log, and a
graceful SIGTERM; real redis-server and `dlock serve` processes, Debian's python3-grpcio and
curl as clients.

Usage: /usr/bin/python3 hardening_test.py DLOCK_BINARY PROTO_DIR [unittest arguments]
The servers, ports and stubs are service_test.py's; the token file and certificates
security_test.py's.
"""
import json
import queue
import os
import shutil
import signal
import socket
import ssl
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import security_test as sec  # noqa: E402 (reads DLOCK_BINARY and PROTO_DIR from sys.argv)
from security_test import ADMIN, JOBS, TOKEN_FILE, SecureService, bearer, curl  # noqa: E402
from service_test import Redis, code_of, grpc, pb, pb_grpc, wait_until  # noqa: E402
import service_test as st  # noqa: E402

NEW = "new-token-9a8b7c6d5e4f3a2b1c0d"  # added to the token file by a reload


def closed_within(sock, seconds):
    """True when the service closes `sock` (EOF or reset) within `seconds`."""
    sock.settimeout(seconds)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except (ConnectionResetError, ssl.SSLError):
        return True
    except socket.timeout:
        return False


def connect(url):
    host, port = url.split("://")[1].rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


class Base(unittest.TestCase):
    """One Redis node and one service with `flags()` (TOKEN_FILE in `tokens_path`)."""

    @classmethod
    def flags(cls):
        return []

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="dlock-hardening-test-")
        cls.tokens_path = os.path.join(cls.dir, "tokens")
        with open(cls.tokens_path, "w") as f:
            f.write(TOKEN_FILE)
        cls.node = Redis()
        try:
            cls.service = SecureService([cls.node.url], cls.flags())
        except BaseException:
            cls.node.close()  # tearDownClass does not run: no redis-server left behind
            raise

    @classmethod
    def tearDownClass(cls):
        code = cls.service.stop()
        said = cls.service.said()
        cls.node.close()
        shutil.rmtree(cls.dir, ignore_errors=True)
        assert code == 0, "dlock serve exit status %r: %s" % (code, said)
        for token in (JOBS, ADMIN, NEW):
            assert token not in said, "dlock serve printed a token: %s" % said

    def setUp(self):
        self.name = "jobs/" + self.id().rsplit(".", 1)[-1]

    def url(self, verb=""):
        return self.service.http + "/v1/locks/" + urllib.parse.quote(self.name, safe="") + verb


class ConnectionLimitTest(Base):
    @classmethod
    def flags(cls):
        return ["--http-max-connections", "3", "--idle-timeout", "1s"]

    def test_over_the_limit_a_connection_gets_503_and_is_closed(self):
        held = [connect(self.service.http) for _ in range(3)]
        try:
            time.sleep(0.3)  # accepted and counted
            extra = connect(self.service.http)
            extra.settimeout(10)
            answer = b""
            while True:
                data = extra.recv(4096)
                if not data:
                    break
                answer += data
            extra.close()
            self.assertTrue(answer.startswith(b"HTTP/1.1 503 "), answer)
            self.assertIn(b"Retry-After: 1\r\n", answer)
            self.assertIn(b"too many connections", answer)
            self.assertTrue(wait_until(lambda: "HTTP connection refused" in
                                       self.service.said()), self.service.said())
        finally:
            for s in held:
                s.close()
        # The places are given back: the service serves again.
        self.assertTrue(wait_until(lambda: curl("GET", self.service.http + "/healthz")[0] == 200))

    def test_a_silent_client_and_one_that_stops_mid_request_are_disconnected(self):
        silent = connect(self.service.http)
        partial = connect(self.service.http)
        partial.sendall(b"POST /v1/locks/x:acquire HTTP/1.1\r\nHost: x\r\n"
                        b"Content-Length: 100\r\n\r\n{\"ttl")
        started = time.monotonic()
        self.assertTrue(closed_within(silent, 10))
        self.assertTrue(closed_within(partial, 10))
        # 1 s of idle timeout; generous on a busy machine, but never "forever".
        self.assertLess(time.monotonic() - started, 8)
        self.assertGreater(time.monotonic() - started, 0.5)
        silent.close()
        partial.close()
        self.assertEqual(self.node.cli("EXISTS", "x"), "0")

    def test_a_kept_alive_connection_is_served_then_closed_when_idle(self):
        s = connect(self.service.http)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 200 "))
        started = time.monotonic()
        self.assertTrue(closed_within(s, 10))
        self.assertGreater(time.monotonic() - started, 0.5)
        s.close()

    def test_a_wait_longer_than_the_idle_timeout_is_not_cut(self):
        holder = curl("POST", self.url(":acquire"), {"ttl_ms": 10000})[1]
        threading.Timer(2.5, lambda: curl("POST", self.url(":release"),
                                          {"owner": holder["owner"]})).start()
        status, answer = curl("POST", self.url(":acquire"), {"ttl_ms": 10000, "wait_ms": 20000})
        self.assertEqual(status, 200, answer)
        curl("POST", self.url(":release"), {"owner": answer["owner"]})

    def test_grpc_a_client_that_never_handshakes_is_disconnected(self):
        host, port = self.service.address.rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=10)
        started = time.monotonic()
        self.assertTrue(closed_within(s, 20))
        self.assertLess(time.monotonic() - started, 15)
        s.close()
        grant = self.service.stub.Acquire(pb.AcquireRequest(name=self.name, ttl_ms=5000),
                                          timeout=30)
        self.service.stub.Release(pb.ReleaseRequest(name=self.name, owner=grant.owner),
                                  timeout=30)


class TlsHandshakeTest(Base):
    @classmethod
    def setUpClass(cls):
        cls.certs = tempfile.mkdtemp(prefix="dlock-hardening-certs-")
        sec.make_certificates(cls.certs)
        super().setUpClass()
        cls.service.http = cls.service.http.replace("http://", "https://")

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.certs, ignore_errors=True)

    @classmethod
    def flags(cls):
        return ["--tls-cert", os.path.join(cls.certs, "server.crt"), "--tls-key",
                os.path.join(cls.certs, "server.key"), "--idle-timeout", "1s"]

    def test_a_client_that_connects_and_never_handshakes_is_disconnected(self):
        s = connect(self.service.http)
        started = time.monotonic()
        self.assertTrue(closed_within(s, 10))
        self.assertLess(time.monotonic() - started, 8)
        s.close()
        ca = ["--cacert", os.path.join(self.certs, "ca.crt")]
        self.assertEqual(curl("GET", self.service.http + "/healthz", extra=ca), (200, "ok"))

    def test_sighup_serves_a_new_certificate_to_new_connections(self):
        # A second CA and a server certificate of it replace the files; new connections get it.
        fresh = tempfile.mkdtemp(prefix="dlock-hardening-fresh-")
        try:
            sec.make_certificates(fresh)
            old_ca = ["--cacert", os.path.join(self.certs, "ca.crt")]
            new_ca = ["--cacert", os.path.join(fresh, "ca.crt")]
            for f in ("server.crt", "server.key"):
                shutil.copy(os.path.join(fresh, f), os.path.join(self.certs, f + ".new"))
            # A bad certificate first: the old one stays, and the service says why.
            with open(os.path.join(self.certs, "server.crt"), "rb") as f:
                good = f.read()
            with open(os.path.join(self.certs, "server.crt"), "w") as f:
                f.write("not a certificate\n")
            self.service.proc.send_signal(signal.SIGHUP)
            self.assertTrue(wait_until(lambda: "previous certificate stays" in
                                       self.service.said()), self.service.said())
            self.assertEqual(curl("GET", self.service.http + "/healthz", extra=old_ca),
                             (200, "ok"))
            with open(os.path.join(self.certs, "server.crt"), "wb") as f:
                f.write(good)
            for f in ("server.crt", "server.key"):
                os.replace(os.path.join(self.certs, f + ".new"), os.path.join(self.certs, f))
            self.service.proc.send_signal(signal.SIGHUP)
            self.assertTrue(wait_until(lambda: "TLS certificate read again" in
                                       self.service.said()), self.service.said())
            self.assertEqual(curl("GET", self.service.http + "/healthz", extra=new_ca),
                             (200, "ok"))
            self.assertEqual(curl("GET", self.service.http + "/healthz", extra=old_ca)[0], 0)
        finally:
            shutil.rmtree(fresh, ignore_errors=True)


def served_certificate(address):
    """The DER certificate the service shows a new TLS connection to `address` (HOST:PORT),
    to a client that trusts anything."""
    host, port = address.rsplit(":", 1)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with context.wrap_socket(raw) as s:
            return s.getpeercert(binary_form=True)


def certificate_of(path):
    """The DER of the first certificate in the PEM file `path`."""
    with open(path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


class GrpcTlsReloadBase(Base):
    """A service over TLS whose files a test rewrites and reloads (SIGHUP): the certificates
    of the start in `certs`, those of another CA in `fresh`."""
    client_ca = False

    @classmethod
    def setUpClass(cls):
        cls.certs = tempfile.mkdtemp(prefix="dlock-hardening-certs-")
        cls.fresh = tempfile.mkdtemp(prefix="dlock-hardening-fresh-")
        sec.make_certificates(cls.certs)
        sec.make_certificates(cls.fresh)
        # The files the service reads: copies, rewritten by the tests.
        for f in ("server.crt", "server.key", "ca.crt"):
            shutil.copy(os.path.join(cls.certs, f), os.path.join(cls.certs, "served-" + f))
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.certs, ignore_errors=True)
        shutil.rmtree(cls.fresh, ignore_errors=True)

    @classmethod
    def flags(cls):
        flags = ["--tls-cert", cls.served("server.crt"), "--tls-key", cls.served("server.key")]
        return flags + (["--tls-client-ca", cls.served("ca.crt")] if cls.client_ca else [])

    @classmethod
    def served(cls, name):
        return os.path.join(cls.certs, "served-" + name)

    def install(self, files):
        """Replaces served files (name -> source path) at once, as a deployment would."""
        for name, source in files.items():
            shutil.copy(source, self.served(name) + ".new")
        for name in files:
            os.replace(self.served(name) + ".new", self.served(name))

    def reload(self, says):
        before = self.service.said().count(says)
        self.service.proc.send_signal(signal.SIGHUP)
        self.assertTrue(wait_until(lambda: self.service.said().count(says) > before),
                        self.service.said())

    def channel(self, ca_dir, client=None):
        """A new gRPC channel over a connection of its own (no subchannel shared with another
        channel) that trusts `ca_dir`'s CA only, showing `client`'s certificate of `ca_dir`."""
        keys = {}
        if client:
            keys = {"private_key": sec.read(os.path.join(ca_dir, client + ".key")),
                    "certificate_chain": sec.read(os.path.join(ca_dir, client + ".crt"))}
        credentials = grpc.ssl_channel_credentials(
            root_certificates=sec.read(os.path.join(ca_dir, "ca.crt")), **keys)
        return grpc.secure_channel(self.service.address, credentials,
                                   options=[("grpc.use_local_subchannel_pool", 1)])

    def grpc_code(self, channel):
        return code_of(pb_grpc.LocksStub(channel).Status, pb.StatusRequest(name=self.name),
                       timeout=10)

    def new_connection_code(self, ca_dir, client=None):
        """The status of a call on a new connection (UNAVAILABLE: the handshake failed)."""
        with self.channel(ca_dir, client) as channel:
            return self.grpc_code(channel)


class GrpcTlsReloadTest(GrpcTlsReloadBase):
    def test_sighup_serves_a_new_certificate_to_new_grpc_connections_and_keeps_open_ones(self):
        ok, refused = grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE
        old, new = certificate_of(self.served("server.crt")), certificate_of(
            os.path.join(self.fresh, "server.crt"))
        held = self.channel(self.certs)  # a connection open across the reloads
        try:
            self.assertEqual(self.grpc_code(held), ok)
            self.assertEqual(served_certificate(self.service.address), old)
            self.assertEqual(self.new_connection_code(self.fresh), refused)
            # A file that is not a certificate, then a certificate with another's key: the
            # previous certificate stays, and the service says why.
            with open(self.served("server.crt"), "w") as f:
                f.write("not a certificate\n")
            self.reload("the previous certificate stays in force")
            self.install({"server.crt": os.path.join(self.fresh, "server.crt")})
            self.reload("the previous certificate stays in force")
            self.assertIn("key values mismatch", self.service.said())
            self.assertEqual(served_certificate(self.service.address), old)
            self.assertEqual(self.new_connection_code(self.certs), ok)
            self.assertEqual(self.new_connection_code(self.fresh), refused)
            # The new certificate and its key: new connections get it, the open one goes on.
            self.install({"server.crt": os.path.join(self.fresh, "server.crt"),
                          "server.key": os.path.join(self.fresh, "server.key")})
            self.reload("certificate read again")
            self.assertEqual(served_certificate(self.service.address), new)
            self.assertEqual(self.new_connection_code(self.fresh), ok)
            self.assertEqual(self.new_connection_code(self.certs), refused)
            self.assertEqual(self.grpc_code(held), ok)
            self.assertIn("TLS certificate read again from %s: it serves the HTTPS and gRPC "
                          "connections opened from now on" % self.served("server.crt"),
                          self.service.said())
            # A bad file now keeps the new one.
            with open(self.served("server.key"), "w") as f:
                f.write("not a key\n")
            self.reload("the previous certificate stays in force")
            self.assertEqual(served_certificate(self.service.address), new)
            self.assertEqual(self.new_connection_code(self.fresh), ok)
        finally:
            held.close()


class GrpcMutualTlsReloadTest(GrpcTlsReloadBase):
    client_ca = True

    def https_status(self, ca_dir, client):
        """curl's HTTP status on /healthz over a new connection with `client`'s certificate of
        `ca_dir` (trusting the service's certificate of the start): 0 when refused."""
        extra = ["--cacert", os.path.join(self.certs, "ca.crt"),
                 "--cert", os.path.join(ca_dir, client + ".crt"),
                 "--key", os.path.join(ca_dir, client + ".key")]
        return curl("GET", self.service.http.replace("http://", "https://") + "/healthz",
                    max_time=10, extra=extra)[0]

    def test_sighup_reads_the_client_ca_again_for_new_grpc_and_https_connections(self):
        ok, refused = grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE
        # The service's certificate stays that of `certs`; the clients' CA moves to `fresh`'s.
        # A client of `fresh` trusts the service through `certs`' CA: channels made here.
        fresh_client = os.path.join(self.certs, "fresh-client")
        os.makedirs(fresh_client, exist_ok=True)
        shutil.copy(os.path.join(self.certs, "ca.crt"), os.path.join(fresh_client, "ca.crt"))
        for f in ("client.crt", "client.key"):
            shutil.copy(os.path.join(self.fresh, f), os.path.join(fresh_client, f))
        held = self.channel(self.certs, "client")  # open across the reloads
        try:
            self.assertEqual(self.grpc_code(held), ok)
            self.assertEqual(self.new_connection_code(fresh_client, "client"), refused)
            self.assertEqual(self.https_status(self.fresh, "client"), 0)
            # A client CA file that is not PEM keeps the previous one.
            with open(self.served("ca.crt"), "w") as f:
                f.write("not a CA\n")
            self.reload("the previous certificate stays in force")
            self.assertIn("--tls-client-ca", self.service.said())
            self.assertEqual(self.new_connection_code(self.certs, "client"), ok)
            self.assertEqual(self.new_connection_code(fresh_client, "client"), refused)
            # The new CA: its clients are served on new connections, the old CA's refused; the
            # open connection goes on.
            self.install({"ca.crt": os.path.join(self.fresh, "ca.crt")})
            self.reload("certificate read again")
            self.assertEqual(self.new_connection_code(fresh_client, "client"), ok)
            self.assertEqual(self.new_connection_code(self.certs, "client"), refused)
            self.assertEqual(self.new_connection_code(self.certs, "stranger"), refused)
            self.assertEqual(self.grpc_code(held), ok)
            self.assertEqual(self.https_status(self.fresh, "client"), 200)
            self.assertEqual(self.https_status(self.certs, "client"), 0)
            self.assertIn("(client CA from %s): it serves the HTTPS and gRPC" %
                          self.served("ca.crt"), self.service.said())
        finally:
            held.close()


class ReloadTest(Base):
    @classmethod
    def flags(cls):
        return ["--tokens", cls.tokens_path]

    def rewrite(self, text, says):
        with open(self.tokens_path + ".tmp", "w") as f:
            f.write(text)
        os.replace(self.tokens_path + ".tmp", self.tokens_path)
        before = self.service.said().count(says)
        self.service.proc.send_signal(signal.SIGHUP)
        self.assertTrue(wait_until(lambda: self.service.said().count(says) > before),
                        self.service.said())

    def grpc_code(self, token):
        return code_of(self.service.stub.Status, pb.StatusRequest(name=self.name),
                       metadata=bearer(token), timeout=30)

    def http_status(self, token):
        return curl("GET", self.url(), token=token)[0]

    def test_sighup_adds_and_removes_tokens_and_a_bad_file_keeps_the_old(self):
        self.assertEqual(self.grpc_code(NEW), grpc.StatusCode.UNAUTHENTICATED)
        self.assertEqual(self.http_status(JOBS), 200)
        # A lock held by the token about to go stays held: a reload drops no lock.
        held = curl("POST", self.url(":acquire"), {"ttl_ms": 30000}, token=JOBS)[1]
        self.rewrite("%s jobs/\n%s *\n" % (NEW, ADMIN), "2 tokens read from")
        self.assertEqual(self.grpc_code(NEW), grpc.StatusCode.OK)
        self.assertEqual(self.http_status(NEW), 200)
        self.assertEqual(self.grpc_code(JOBS), grpc.StatusCode.UNAUTHENTICATED)
        self.assertEqual(self.http_status(JOBS), 401)
        self.assertTrue(st.lock_held_by(self.node.cli("GET", self.name), held["owner"]))
        # The new token's prefixes are its own.
        self.assertEqual(code_of(self.service.stub.Status, pb.StatusRequest(name="other"),
                                 metadata=bearer(NEW), timeout=30),
                         grpc.StatusCode.PERMISSION_DENIED)
        # A bad file (a short token on line 2) keeps the tokens of the last good one.
        self.rewrite("%s jobs/\nshort x\n" % JOBS, "the previous tokens stay in force")
        self.assertIn(":2: ", self.service.said())
        self.assertEqual(self.grpc_code(NEW), grpc.StatusCode.OK)
        self.assertEqual(self.grpc_code(JOBS), grpc.StatusCode.UNAUTHENTICATED)
        # An empty or missing file keeps them too: never open to everyone.
        self.rewrite("", "the previous tokens stay in force")
        os.remove(self.tokens_path)
        before = self.service.said().count("the previous tokens stay in force")
        self.service.proc.send_signal(signal.SIGHUP)
        self.assertTrue(wait_until(lambda: self.service.said().count(
            "the previous tokens stay in force") > before))
        self.assertEqual(self.grpc_code(None), grpc.StatusCode.UNAUTHENTICATED)
        self.assertEqual(self.http_status(None), 401)
        self.assertEqual(self.grpc_code(NEW), grpc.StatusCode.OK)
        self.assertEqual(curl("POST", self.url(":release"), {"owner": held["owner"]},
                              token=NEW)[0], 200)
        with open(self.tokens_path, "w") as f:
            f.write(TOKEN_FILE)


class AccessLogTest(Base):
    @classmethod
    def flags(cls):
        return ["--tokens", cls.tokens_path, "--access-log",
                os.path.join(cls.dir, "access.log")]

    def lines(self):
        with open(os.path.join(self.dir, "access.log")) as f:
            return [json.loads(line) for line in f]

    def test_one_json_line_per_call_with_the_token_id_and_no_secret(self):
        grant = self.service.stub.Acquire(pb.AcquireRequest(name=self.name, ttl_ms=10000),
                                          metadata=bearer(JOBS), timeout=30)
        status, answer = curl("POST", self.url(":acquire"), {"ttl_ms": 10000}, token=ADMIN)
        self.assertEqual(status, 409, answer)
        self.assertEqual(curl("GET", self.service.http + "/healthz")[0], 200)
        self.assertEqual(code_of(self.service.stub.Status, pb.StatusRequest(name=self.name),
                                 metadata=bearer("wrong-token-0000000000000"), timeout=30),
                         grpc.StatusCode.UNAUTHENTICATED)
        self.service.stub.Release(pb.ReleaseRequest(name=self.name, owner=grant.owner),
                                  metadata=bearer(JOBS), timeout=30)
        self.assertTrue(wait_until(lambda: len(self.lines()) >= 5))
        lines = self.lines()
        for line in lines:
            self.assertEqual(set(line), {"time", "transport", "method", "name", "token", "peer",
                                         "status", "duration_us"}, line)
            self.assertRegex(line["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
            self.assertIsInstance(line["duration_us"], int)
            self.assertEqual(line["peer"], "127.0.0.1")
        acquire, refused, health, unknown, release = lines[-5:]
        self.assertEqual((acquire["transport"], acquire["method"], acquire["name"],
                          acquire["status"]),
                         ("grpc", "/dlock.v1.Locks/Acquire", self.name, "OK"))
        self.assertEqual((refused["transport"], refused["method"], refused["name"],
                          refused["status"]),
                         ("http", "POST /v1/locks/{name}:acquire", self.name, 409))
        self.assertEqual((health["method"], health["token"], health["status"]),
                         ("GET /healthz", "", 200))
        self.assertEqual((unknown["status"], unknown["token"]), ("UNAUTHENTICATED", ""))
        self.assertEqual((release["method"], release["status"]),
                         ("/dlock.v1.Locks/Release", "OK"))
        self.assertRegex(acquire["token"], r"^sha256:[0-9a-f]{12}$")
        self.assertEqual(acquire["token"], release["token"])
        self.assertNotEqual(acquire["token"], refused["token"])
        with open(os.path.join(self.dir, "access.log")) as f:
            text = f.read()
        for secret in (JOBS, ADMIN, grant.owner, "wrong-token"):
            self.assertNotIn(secret, text)


class GracefulShutdownTest(unittest.TestCase):
    def test_sigterm_ends_waits_as_unavailable_closes_connections_and_keeps_leases(self):
        node = Redis()
        service = st.Service([node.url])
        try:
            holder = service.stub.Acquire(pb.AcquireRequest(name="s", ttl_ms=60000), timeout=30)
            grpc_wait = service.stub.Acquire.future(
                pb.AcquireRequest(name="s", ttl_ms=1000, wait_ms=60000, fair=True), timeout=60)
            http_wait = {}
            waiter = threading.Thread(target=lambda: http_wait.update(answer=st.curl(
                "POST", service.http + "/v1/locks/s:acquire",
                {"ttl_ms": 1000, "wait_ms": 60000, "fair": True}, max_time=60)))
            waiter.start()
            requests = queue.Queue()
            keepalive = service.stub.KeepAlive(iter(requests.get, None), timeout=60)
            requests.put(pb.KeepAliveRequest(leases=[pb.LeaseRef(
                name="s", owner=holder.owner, ttl_ms=60000)]))
            self.assertGreater(next(keepalive).leases[0].validity_ms, 0)
            idle = connect(service.http)  # a kept-alive connection between requests
            idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertTrue(idle.recv(4096).startswith(b"HTTP/1.1 200 "))
            self.assertTrue(wait_until(lambda: node.cli("ZCARD", "dlock:queue:{s}") == "2"))
            started = time.monotonic()
            service.proc.send_signal(signal.SIGTERM)
            with self.assertRaises(grpc.RpcError) as cm:
                grpc_wait.result(timeout=10)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
            self.assertIn("stopping", cm.exception.details())
            waiter.join(10)
            self.assertEqual(http_wait["answer"][0], 503, http_wait)
            self.assertIn("stopping", http_wait["answer"][1]["error"])
            self.assertTrue(closed_within(idle, 10))
            # The keep-alive stream is ended by the service itself, saying why (not by gRPC's
            # grace running out), and its lease is not released.
            with self.assertRaises(grpc.RpcError) as cm:
                for _ in keepalive:
                    pass
            self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
            self.assertIn("stopping", cm.exception.details())
            requests.put(None)
            self.assertEqual(service.proc.wait(timeout=15), 0)
            self.assertLess(time.monotonic() - started, 10)
            self.assertTrue(wait_until(lambda: node.cli("ZCARD", "dlock:queue:{s}") == "0"))
            # The lease lives in Redis, not in the instance: another instance can release it.
            self.assertTrue(st.lock_held_by(node.cli("GET", "s"), holder.owner))
            other = st.Service([node.url])
            try:
                other.stub.Release(pb.ReleaseRequest(name="s", owner=holder.owner), timeout=30)
            finally:
                other.stop()
            idle.close()
        finally:
            service.stop()
            node.close()


class FlagsTest(unittest.TestCase):
    def test_bad_connection_flags_are_usage_errors(self):
        for flags in [["--http-max-connections", "0"], ["--idle-timeout", "0"],
                      ["--idle-timeout", "soon"], ["--access-log", "/nonexistent/dir/log"]]:
            with self.subTest(flags=flags):
                r = sec.subprocess.run([st.DLOCK, "serve", "-r", "redis://127.0.0.1:1"] + flags,
                                       capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 64, r.stderr)
                self.assertIn(flags[0], r.stderr)


if __name__ == "__main__":
    try:
        unittest.main(verbosity=2)
    finally:
        shutil.rmtree(st._stubs, ignore_errors=True)
