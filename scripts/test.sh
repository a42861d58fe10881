#!/usr/bin/env bash
# The test command (README and CI): installs what it needs, checks formatting, then builds
# and runs every test in three builds: -Werror (dev), AddressSanitizer+UBSan, ThreadSanitizer.
# Usage: bash scripts/test.sh [dev|asan|tsan ...]   (default: all three)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

# CI must not skip server tests: a missing redis-server is a failure, not a skip.
export DLOCK_REQUIRE_REDIS=1
jobs=$(nproc 2>/dev/null || echo 2)

step() { printf '\n== %s\n' "$*"; }

step "clang-format"
git ls-files '*.h' '*.cc' | xargs clang-format --dry-run -Werror

presets=("$@")
((${#presets[@]})) || presets=(dev asan tsan)
for preset in "${presets[@]}"; do
  step "$preset: configure and build"
  timeout 1500 cmake --preset "$preset" >/dev/null
  timeout 1500 cmake --build "build/$preset" -j "$jobs"
  step "$preset: tests"
  timeout 1200 ctest --test-dir "build/$preset" -j "$jobs" --output-on-failure
done
step "all tests passed"
