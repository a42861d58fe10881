#!/usr/bin/env bash
# The test command (README and CI): installs what it needs, checks formatting and function
# sizes (scripts/check-function-size.py: at most 60 lines), then builds
# and runs the tests in three builds: -Werror (dev: every test, then the install checks and
# a smoke run of the benchmark), AddressSanitizer+UBSan and ThreadSanitizer (the tests a
# sanitizer can find something in: see "Which tests run where" below); then runs the
# libFuzzer targets (clang) side by side for a bounded time each. clang-tidy (.clang-tidy) over
# src/ and tools/ is a step of its own, `tidy`, run by hand: 74 files took 6.4 minutes on the
# 2-core machine, a third of CI's 20-minute budget on top of the rest.
# Usage: bash scripts/test.sh              everything, as CI runs it
#        bash scripts/test.sh quick        the quick preset (dev's flags, without the service:
#                                          build/quick); unit, simulation and core integration
#                                          tests (no failover, chaos, overload or service
#                                          suites), then clang-tidy over the .cc files changed
#                                          since origin/main: the loop to run before every
#                                          commit (cmake/BuildSpeed.cmake: its build's time)
#        bash scripts/test.sh dev|tidy|asan|tsan|fuzz ...   those steps only (tidy is in
#                                          neither the default nor quick: minutes on 2 cores)
# DLOCK_FUZZ_SECONDS sets the time per fuzz target (default 20); DLOCK_TEST_JOBS the ctest
# jobs (default 8 per core in dev, 2 in the sanitizer builds: most tests wait on
# redis-server and timers, not on the CPU, but sanitized code is several times slower and at
# 4 per core on a busy machine timers of a few hundred ms ran late; the CPU-heavy tests count
# as 4 jobs, PROCESSORS).
#
# Which tests run where (labels: tests/labels.cmake, tests/chaos/CMakeLists.txt):
#   dev   every test;
#   asan  (the library and the tool with ASan+UBSan, the test code with ASan: tests/CMakeLists.txt)
#         unit and simulation tests, the integration and regression tests on real servers
#         (connections, the engine, lock logic, the CLI and its signal handling), the cluster
#         and Sentinel node tests; not the long failover suites (label failover), the chaos
#         runs or overload and the examples (label slow): those check timing and safety under
#         faults, which the dev build checks at full speed, and they run there; nor the
#         one-node run of a test that also runs on several nodes (label one_node: one code
#         path for one node and for N, which the several-node run takes through the fan-out
#         and the quorum as well; the single-server tests still run; 13% of the stage);
#   tsan  the same minus the cluster and Sentinel tests (labels cluster, sentinel: their failover
#         timing under TSan on 2 cores made the replica guard miss its WAIT; they run in dev and
#         asan).
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
step "function size: at most 60 lines in src/, include/ and tools/"
python3 scripts/check-function-size.py
step "layers: what each folder of src/ may include (docs/design.md)"
python3 scripts/check-layers.py

# clang-tidy (.clang-tidy) over the files matching the regexes given. Its own configuration
# without unity builds (a compile command per file, which clang-tidy needs) and without
# precompiled headers (clang cannot read GCC's, and each file is checked as it is); nothing is
# compiled but the generated sources the files include.
tidy() {
  timeout 900 cmake --preset dev -B build/tidy -DDLOCK_UNITY=OFF -DDLOCK_PCH=OFF >/dev/null
  local generated=(src/embedded_scripts.cc)
  if ninja -C build/tidy -t query proto/dlock/v1/lock.pb.h >/dev/null 2>&1; then
    generated+=(proto/dlock/v1/lock.pb.h proto/dlock/v1/lock.grpc.pb.h)  # the service's
  fi
  timeout 900 ninja -C build/tidy "${generated[@]}" >/dev/null
  timeout 1800 run-clang-tidy -p build/tidy -j "$jobs" -quiet "$@" \
    >build/tidy.log 2>&1 || { grep -E 'warning:|error:' build/tidy.log; exit 1; }
}

# quick's tidy: the .cc files of src/ and tools/ changed since origin/main (without one, since
# HEAD: the uncommitted ones), new files included. All of them take 6.4 minutes on 2 cores; a
# change's few files, seconds. On a clean clone of main nothing changed: nothing to do.
tidy_changed() {
  local base=HEAD
  if git rev-parse -q --verify origin/main >/dev/null; then base=$(git merge-base HEAD origin/main); fi
  local changed=() f
  while read -r f; do
    [ -f "$f" ] && changed+=("^$PWD/$(printf '%s' "$f" | sed 's/[.+]/\\&/g')\$")
  done < <({
    git diff --name-only "$base" -- 'src/*.cc' 'tools/*.cc'
    git ls-files --others --exclude-standard -- 'src/*.cc' 'tools/*.cc'
  } | sort -u)
  if ((${#changed[@]} == 0)); then
    echo "no .cc file of src/ or tools/ changed since $base: nothing to tidy"
    return
  fi
  tidy "${changed[@]}"
}

presets=("$@")
((${#presets[@]})) || presets=(dev asan tsan fuzz)
quick=0
if [ "${presets[*]}" = quick ]; then
  quick=1  # the quick preset: dev's flags in build/quick, without the service (CMakePresets.json)
fi
# What ctest runs per preset (labels, tests/CMakeLists.txt). A program a build leaves out
# (build_targets) leaves a <program>_NOT_BUILT placeholder test, left out by name.
ctest_args() {
  case "$1" in
    quick) echo "-LE slow|failover|chaos|cluster|sentinel -E _NOT_BUILT$" ;;
    asan) echo "-LE slow|failover|chaos|one_node -E _NOT_BUILT$" ;;
    tsan) echo "-LE slow|failover|chaos|cluster|sentinel|one_node -E _NOT_BUILT$" ;;
  esac
}
# What each build compiles: only the programs whose tests it runs (quick_tests: every test
# program but the cluster, Sentinel, overload and examples programs; tests/CMakeLists.txt).
build_targets() {
  case "$1" in
    quick) echo "--target quick_tests" ;;
    asan) echo "--target quick_tests cluster_test sentinel_test" ;;
    tsan) echo "--target quick_tests" ;;
  esac
}
for preset in "${presets[@]}"; do
  if [ "$preset" = tidy ]; then
    step "tidy: clang-tidy over src/ and tools/ (.clang-tidy)"
    tidy "^$PWD/(src|tools)/"
    continue
  fi
  if [ "$preset" = fuzz ]; then
    step "fuzz: reply reader, URL and duration parsing (${DLOCK_FUZZ_SECONDS:-20}s each)"
    timeout 900 cmake --preset fuzz >/dev/null
    timeout 900 cmake --build build/fuzz -j "$jobs" --target reply_fuzz url_fuzz duration_fuzz
    # The three at once: each gets its seconds of wall time, and two cores instead of one.
    fuzz_targets=(reply_fuzz url_fuzz duration_fuzz)
    declare -A fuzz_pid
    for target in "${fuzz_targets[@]}"; do
      corpus=build/fuzz/corpus-$target
      rm -rf "$corpus" && mkdir -p "$corpus"
      timeout 300 "build/fuzz/tests/fuzz/$target" -max_total_time="${DLOCK_FUZZ_SECONDS:-20}" \
        "$corpus" >"build/fuzz/$target.log" 2>&1 &
      fuzz_pid[$target]=$!
    done
    fuzz_failed=0
    for target in "${fuzz_targets[@]}"; do
      if wait "${fuzz_pid[$target]}"; then
        echo "$target: $(grep -E '^Done' "build/fuzz/$target.log")"
      else
        tail -n 40 "build/fuzz/$target.log"
        echo "fuzzer $target failed"
        fuzz_failed=1
      fi
    done
    ((!fuzz_failed)) || exit 1
    continue
  fi
  step "$preset: configure and build"
  timeout 1500 cmake --preset "$preset" >/dev/null
  # shellcheck disable=SC2046 # one word each
  timeout 1500 cmake --build "build/$preset" -j "$jobs" $(build_targets "$preset")
  step "$preset: tests"
  per_core=2
  case $preset in dev | quick) per_core=8 ;; esac
  test_jobs=${DLOCK_TEST_JOBS:-$((per_core * jobs))}
  # The simulation runs in simulated time (docs/simulation.md): a schedule is 1-2.5 ms of CPU
  # in the dev build, so the full tier's dev run covers 1,000 per case (about 1.5 s each), the
  # quick tier and the sanitizer builds (20-50 ms a schedule under TSan) sim_test's default 80.
  sim_schedules=${DLOCK_SIM_SCHEDULES:-}
  [ "$preset" = dev ] && sim_schedules=${sim_schedules:-1000}
  # shellcheck disable=SC2046 # the labels are one word each
  DLOCK_SIM_SCHEDULES=$sim_schedules timeout 1200 ctest --test-dir "build/$preset" \
    -j "$test_jobs" --output-on-failure $(ctest_args "$preset")
  if ((quick)); then
    step "tidy: clang-tidy over the changed .cc files of src/ and tools/ (.clang-tidy)"
    tidy_changed
  fi
  if [ "$preset" = dev ]; then
    # The two at once (neither measures time; the install checks compile while the benchmark
    # mostly waits on its servers), each into its log, shown after.
    step "install checks (cmake --install, find_package, pkg-config, add_subdirectory, the .deb)" \
      "and a benchmark smoke run, side by side"
    bash bench/install-peers.sh  # its apt-get before, not beside, the install checks' dpkg
    timeout 900 bash scripts/check-install.sh "build/$preset" >build/install-check.log 2>&1 &
    install_pid=$!
    # Only that it still works (a few iterations of everything, peers included); the numbers
    # of a smoke run mean nothing. The real run: bash bench/run.sh (docs/performance.md).
    bench_ok=1
    DLOCK_BENCH_PRESET=dev timeout 900 bash bench/run.sh --smoke --out build/bench-smoke \
      >build/bench-smoke.log 2>&1 || bench_ok=0
    install_ok=1
    wait "$install_pid" || install_ok=0
    cat build/install-check.log
    tail -n 20 build/bench-smoke.log
    ((install_ok)) || { echo "the install checks failed"; exit 1; }
    ((bench_ok)) || { echo "the benchmark smoke run failed"; exit 1; }
    grep -q "^## Targets" build/bench-smoke/performance.md
    test -s build/bench-smoke/performance.csv
  fi
done
step "all tests passed"
