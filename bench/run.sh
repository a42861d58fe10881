#!/usr/bin/env bash
# The benchmark command (README): installs what it needs, builds dlock_bench (release preset),
# installs node-redlock and ioredis from npm into build/bench-node, then runs dlock_bench, which
# starts its own redis-servers, measures dlock and every peer in one run and writes
# docs/performance.md, performance.csv and performance.png.
#
# Usage: bash bench/run.sh [dlock_bench options]     e.g. --smoke --out /tmp/bench
#   DLOCK_BENCH_PRESET=dev   use (and build) another preset's dlock_bench (CI's smoke run)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
bash bench/install-peers.sh

preset=${DLOCK_BENCH_PRESET:-release}
# Configured once (a build reconfigures itself when CMakeLists change): scripts/test.sh runs this
# beside the install checks, which read build/dev while they run.
[ -f "build/$preset/build.ninja" ] || cmake --preset "$preset" >/dev/null
cmake --build "build/$preset" --target dlock_bench

# Exact versions from bench/peers/package.json, into a folder of their own.
mkdir -p build/bench-node
cp bench/peers/package.json build/bench-node/package.json
(cd build/bench-node && npm install --no-audit --no-fund --loglevel=error >/dev/null)

NODE_PATH="$PWD/build/bench-node/node_modules" exec "build/$preset/bench/dlock_bench" "$@"
