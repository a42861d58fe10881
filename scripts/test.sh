#!/usr/bin/env bash
# The test command (README and CI): installs what it needs, checks formatting, then builds
# and runs every test in three builds: -Werror (dev, then the install checks and a smoke run
# of the benchmark),
# AddressSanitizer+UBSan, ThreadSanitizer; then runs the libFuzzer targets (clang) for a
# bounded time each.
# Usage: bash scripts/test.sh [dev|asan|tsan|fuzz ...]   (default: all four)
# DLOCK_FUZZ_SECONDS sets the time per fuzz target (default 20).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

# CI must not skip server tests: a missing redis-server is a failure, not a skip.
export DLOCK_REQUIRE_REDIS=1
jobs=$(nproc 2>/dev/null || echo 2)

# Each step with the time it starts, so a CI log shows where the minutes go.
step() { printf '\n== [%s] %s\n' "$(date +%T)" "$*"; }

step "clang-format"
git ls-files '*.h' '*.cc' | xargs clang-format --dry-run -Werror

presets=("$@")
((${#presets[@]})) || presets=(dev asan tsan fuzz)
for preset in "${presets[@]}"; do
  if [ "$preset" = fuzz ]; then
    step "fuzz: reply reader, URL and duration parsing (${DLOCK_FUZZ_SECONDS:-20}s each)"
    timeout 900 cmake --preset fuzz >/dev/null
    timeout 900 cmake --build build/fuzz -j "$jobs" --target reply_fuzz url_fuzz duration_fuzz
    for target in reply_fuzz url_fuzz duration_fuzz; do
      corpus=$(mktemp -d)
      if ! timeout 300 "build/fuzz/tests/fuzz/$target" -max_total_time="${DLOCK_FUZZ_SECONDS:-20}" \
        "$corpus" >"$corpus.log" 2>&1; then
        tail -n 40 "$corpus.log"
        echo "fuzzer $target failed"
        exit 1
      fi
      echo "$target: $(grep -E '^Done' "$corpus.log")"
      rm -rf "$corpus" "$corpus.log"
    done
    continue
  fi
  step "$preset: configure and build"
  timeout 1500 cmake --preset "$preset" >/dev/null
  timeout 1500 cmake --build "build/$preset" -j "$jobs"
  step "$preset: tests"
  timeout 1200 ctest --test-dir "build/$preset" -j "$jobs" --output-on-failure
  if [ "$preset" = dev ]; then
    step "install: cmake --install, find_package, pkg-config, add_subdirectory, the .deb"
    timeout 900 bash scripts/check-install.sh "build/$preset"
    # Only that it still works (a few iterations of everything, peers included); the numbers
    # of a smoke run mean nothing. The real run: bash bench/run.sh (docs/performance.md).
    step "benchmark smoke run"
    DLOCK_BENCH_PRESET=dev timeout 900 bash bench/run.sh --smoke --out build/bench-smoke
    grep -q "^## Targets" build/bench-smoke/performance.md
    test -s build/bench-smoke/performance.csv
  fi
done
step "all tests passed"
