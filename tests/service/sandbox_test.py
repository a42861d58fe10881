# SPDX-License-Identifier: MIT
"""`dlock sandbox --service` end to end: local redis-server nodes and a `dlock serve` in front
of them, reached as the printed lines say (gRPC with Debian's python3-grpcio, HTTP with curl);
the locks are on the sandbox's nodes; SIGTERM stops the service and the nodes (exit 0, no
process left); a service that cannot listen stops the sandbox with 69 and its nodes with it.

Usage: /usr/bin/python3 sandbox_test.py DLOCK_BINARY PROTO_DIR [unittest arguments]
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import service_test as st  # noqa: E402 (takes DLOCK_BINARY and PROTO_DIR off sys.argv)
from service_test import curl, grpc, pb  # noqa: E402


def children_of(pid):
    r = subprocess.run(["ps", "--ppid", str(pid), "-o", "pid="], capture_output=True, text=True)
    return [int(p) for p in r.stdout.split()]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for this purpose: it serves nothing.
    with open("/proc/%d/stat" % pid) as f:
        return f.read().split(") ")[-1][0] != "Z"


def ports_of(redis_line):
    return [int(url.rsplit(":", 1)[1]) for url in redis_line.split("=", 1)[1].split(",")]


def redis_cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port)] + list(args), capture_output=True,
                          text=True).stdout.strip()


class SandboxServiceTest(unittest.TestCase):
    def start(self, *flags):
        return subprocess.Popen([st.DLOCK, "sandbox", "--service"] + list(flags),
                                stdout=subprocess.PIPE, text=True)

    def test_the_printed_addresses_serve_locks_on_the_sandbox_nodes_until_sigterm(self):
        sandbox = self.start("--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
        try:
            lines = [sandbox.stdout.readline().strip() for _ in range(3)]
            self.assertTrue(lines[0].startswith("DLOCK_REDIS=redis://"), lines)
            self.assertTrue(lines[1].startswith("DLOCK_SERVICE_GRPC=127.0.0.1:"), lines)
            self.assertTrue(lines[2].startswith("DLOCK_SERVICE_HTTP=http://127.0.0.1:"), lines)
            ports = ports_of(lines[0])
            self.assertEqual(len(ports), 3)
            http = lines[2].split("=", 1)[1]
            status, grant = curl("POST", http + "/v1/locks/sandboxed:acquire", {"ttl_ms": 30000})
            self.assertEqual(status, 200, grant)
            with grpc.insecure_channel(lines[1].split("=", 1)[1]) as channel:
                stub = st.pb_grpc.LocksStub(channel)
                with self.assertRaises(grpc.RpcError) as held:
                    stub.Acquire(pb.AcquireRequest(name="sandboxed", ttl_ms=1000), timeout=30)
                self.assertEqual(held.exception.code(), grpc.StatusCode.ABORTED)
                stub.Release(pb.ReleaseRequest(name="sandboxed", owner=grant["owner"]),
                             timeout=30)
                again = stub.Acquire(pb.AcquireRequest(name="sandboxed", ttl_ms=30000),
                                     timeout=30)
            # The lock is on the sandbox's nodes, as the DLOCK_REDIS line names them.
            for port in ports:
                self.assertTrue(st.lock_held_by(redis_cli(port, "GET", "sandboxed"), again.owner))
            children = children_of(sandbox.pid)
            self.assertEqual(len(children), 4)  # 3 redis-server, 1 dlock serve
            sandbox.send_signal(signal.SIGTERM)
            self.assertEqual(sandbox.wait(timeout=30), 0)
            self.assertEqual([pid for pid in children if alive(pid)], [])
        finally:
            if sandbox.poll() is None:
                sandbox.kill()
                sandbox.wait()
            sandbox.stdout.close()

    def test_a_service_that_cannot_listen_stops_the_sandbox_and_its_nodes(self):
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            sandbox = self.start("--grpc-listen", "127.0.0.1:0",
                                 "--http-listen", "127.0.0.1:%d" % port)
            redis_line = sandbox.stdout.readline().strip()
            self.assertEqual(sandbox.wait(timeout=30), 69)
            sandbox.stdout.close()
        for node in ports_of(redis_line):
            self.assertNotEqual(redis_cli(node, "PING"), "PONG")

    def test_listen_flags_need_service(self):
        r = subprocess.run([st.DLOCK, "sandbox", "--http-listen", "127.0.0.1:0"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 64, r.stderr)


if __name__ == "__main__":
    try:
        unittest.main(verbosity=2)
    finally:
        shutil.rmtree(st._stubs, ignore_errors=True)
