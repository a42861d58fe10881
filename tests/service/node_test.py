# SPDX-License-Identifier: MIT
"""The lock service from Node.js: @grpc/grpc-js and @grpc/proto-loader from the npm registry
(pinned by tests/service/node/package-lock.json, installed into the build tree by
node/install.py) drive a real `dlock serve` in front of 3 real redis-server processes
(node/lock_client_test.js). The fencing counter is first raised past 2^53 on every node, so the
token the Node client reads is exact only if it never passed through a JavaScript number.

Without Node.js or the packages (no network) the test fails when DLOCK_REQUIRE_REDIS=1 (CI),
and is skipped, saying why, otherwise.

Usage: /usr/bin/python3 node_test.py DLOCK_BINARY PROTO_DIR NODE_DIR [unittest arguments]
"""
import json
import os
import shutil
import subprocess
import sys
import unittest

NODE_DIR = sys.argv.pop(3) if len(sys.argv) > 3 else "node-packages"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import service_test as st  # noqa: E402 (takes DLOCK_BINARY and PROTO_DIR off sys.argv)
from service_test import pb  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REQUIRED = os.environ.get("DLOCK_REQUIRE_REDIS") == "1"


def node_modules(test):
    """The installed packages' folder; fails (CI) or skips (elsewhere) when they cannot be had."""
    why = None
    if shutil.which("node") is None:
        why = "no `node` on PATH (scripts/install-deps.sh installs Debian's nodejs)"
    else:
        r = subprocess.run([sys.executable, os.path.join(HERE, "node", "install.py"), NODE_DIR],
                           capture_output=True, text=True, timeout=600)
        if r.returncode == 0:
            return r.stdout.strip().splitlines()[-1]
        why = "the npm packages could not be installed: " + (r.stderr.strip() or r.stdout)[-2000:]
    if REQUIRED:
        test.fail(why)
    raise unittest.SkipTest(why)


class NodeClientTest(unittest.TestCase):
    def test_node_client_takes_extends_and_releases_and_reads_the_token_exactly(self):
        modules = node_modules(self)
        nodes = [st.Redis() for _ in range(3)]
        service = st.Service([n.url for n in nodes])
        try:
            name = "node-client"
            # A token past 2^32 (no 32-bit truncation on the way) and as large as the service's
            # tokens are exact today: its scripts count in Lua numbers, doubles, so a counter
            # past 2^53 is rounded on the nodes already (lock_client_test.js checks the client's
            # own decoding up to 2^64 - 1).
            start = 2 ** 53 - 64
            for n in nodes:
                self.assertEqual(n.cli("SET", "dlock:fence:{%s}" % name, str(start)), "OK")
            r = subprocess.run(["node", os.path.join(HERE, "node", "lock_client_test.js"),
                                modules, st.PROTO_DIR, service.address, name],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            got = json.loads(r.stdout.strip().splitlines()[-1])
            token = int(got["fencing_token"])
            self.assertGreater(token, start)
            self.assertLess(token, 2 ** 53)
            # The token the nodes counted, as Python's exact integers see it: each node's counter
            # is the token, or one more where the refused second acquire went as the native
            # acquisition (its INCR runs whether or not its SET wrote: docs/protocol.md, "The
            # native acquisition"; each node decides that by its own record window).
            status = service.stub.Status(pb.StatusRequest(name=name), timeout=30)
            for n in status.nodes:
                self.assertIn(n.fence, (token, token + 1))
            self.assertFalse(status.held)  # released by the Node client
            self.assertGreater(got["extended_ms"], 10000)
        finally:
            code = service.stop()
            for n in nodes:
                n.close()
        self.assertEqual(code, 0)


if __name__ == "__main__":
    try:
        unittest.main(verbosity=2)
    finally:
        shutil.rmtree(st._stubs, ignore_errors=True)
