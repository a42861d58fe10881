# SPDX-License-Identifier: MIT
"""Installs the Node.js client test's npm packages (package.json, pinned by package-lock.json)
into a folder of the build tree, with `npm ci` (the registry's own tool, which checks every
package's integrity against the lock file).

npm comes from the registry too, as one pinned tarball checked against its sha512 (npm bundles
its own dependencies): Debian 12's `npm` package would bring 355 Debian packages (23 MB) to a CI
machine for this one test, where `nodejs` alone is 7 (11 MB). docs/service.md has the numbers.

Usage: python3 install.py DEST_DIR
Prints the node_modules folder. Skips the work when DEST_DIR already holds this lock file's
packages. Exits non-zero, saying why, when anything fails (no network, a bad checksum).
"""
import base64
import fcntl
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import urllib.request

NPM_VERSION = "10.9.2"  # runs on Debian 12's Node.js 18.20 (npm 10 needs 18.17 or later)
NPM_TARBALL = "https://registry.npmjs.org/npm/-/npm-%s.tgz" % NPM_VERSION
NPM_SHA512 = ("iriPEPIkoMYUy3F6f3wwSZAU93E0Eg6cHwIR6jzzOXWSy+SD/rOODEs74cVONHKSx2obXtuUoyidVEhISrisgQ"
              "==")
HERE = os.path.dirname(os.path.abspath(__file__))


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def fetch_npm(dest):
    """npm's own tarball, checked, unpacked into dest/npm; returns its npm-cli.js."""
    cli = os.path.join(dest, "npm", "bin", "npm-cli.js")
    if os.path.exists(cli):
        return cli
    with urllib.request.urlopen(NPM_TARBALL, timeout=60) as r:
        data = r.read()
    got = base64.b64encode(hashlib.sha512(data).digest()).decode()
    if got != NPM_SHA512:
        raise SystemExit("install.py: npm %s tarball sha512 %s, expected %s"
                         % (NPM_VERSION, got, NPM_SHA512))
    staging = os.path.join(dest, "npm.partial")
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(staging, filter="data")  # no links or paths out of staging
        else:
            tar.extractall(staging)  # checked against its sha512 above
    os.replace(os.path.join(staging, "package"), os.path.join(dest, "npm"))
    shutil.rmtree(staging, ignore_errors=True)
    return cli


def main():
    dest = os.path.abspath(sys.argv[1])
    os.makedirs(dest, exist_ok=True)
    # Several tests (node_test.py, chaos_test.py) install here, perhaps at once under ctest -j:
    # one at a time, the others then find the stamp.
    claim = open(os.path.join(dest, "install.lock"), "w")
    fcntl.flock(claim, fcntl.LOCK_EX)
    lock = os.path.join(HERE, "package-lock.json")
    stamp = os.path.join(dest, "installed.sha256")
    modules = os.path.join(dest, "node_modules")
    if os.path.exists(stamp) and open(stamp).read() == digest(lock) and os.path.isdir(modules):
        print(modules)
        return
    cli = fetch_npm(dest)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(os.path.join(HERE, name), os.path.join(dest, name))
    # --ignore-scripts: nothing of the packages runs at install time.
    subprocess.run(["node", cli, "ci", "--ignore-scripts", "--no-audit", "--no-fund",
                    "--loglevel=error", "--cache", os.path.join(dest, "npm-cache")],
                   cwd=dest, check=True, stdout=sys.stderr)
    with open(stamp, "w") as f:
        f.write(digest(lock))
    print(modules)


if __name__ == "__main__":
    main()
