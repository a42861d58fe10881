#!/usr/bin/env bash
# Installs every Debian 12 package that dlock's build, tests and demo need.
# Idempotent: packages already present are left alone. Run as root (or with sudo).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libhiredis-dev     # RESP encoding and parsing (reader fed from our own I/O)
  libasio-dev        # sockets, timers, TLS
  libssl-dev         # TLS for rediss://
  libcli11-dev       # argument parsing for the dlock tool
  liburiparser-dev   # URL parsing (RFC 3986) for node addresses
  libcurl4-openssl-dev # the benchmark's HTTP/JSON client of `dlock serve`
  nlohmann-json3-dev # JSON output of `dlock status --json`
  libgtest-dev libgmock-dev googletest
  redis-server redis-tools # tests and the demo start real servers
  openssl                  # tests make TLS certificates
  clang-format
  clang-tidy               # bash scripts/test.sh tidy (.clang-tidy)
  python3                  # scripts/check-function-size.py
  clang libclang-rt-14-dev # the libFuzzer targets
  libfaketime              # the chaos runner's worker with a skewed clock
  help2man                 # dlock(1), made from the tool's --help
  # `dlock serve` (docs/service.md): gRPC and protobuf, and the Python client of its tests
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libhttp-parser-dev       # its HTTP/1.1 transport
  python3-grpcio python3-protobuf curl
  python3-redis            # the service tests' queries of their redis-servers
  nodejs                   # its Node.js client test (npm itself comes pinned from the registry:
                           # Debian's npm brings 355 packages; tests/service/node/install.py)
  dpkg-dev file            # cpack's Debian package (dpkg-shlibdeps) in scripts/check-install.sh
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
# The Debian package starts a system redis on 6379; dlock's tests and demo start their own
# servers, so a running system instance is harmless, but we do not need it either.
