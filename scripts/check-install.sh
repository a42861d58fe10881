#!/usr/bin/env bash
# Checks that dlock can be used the ways users take it (called by scripts/test.sh after the
# dev build; the dev preset builds a shared libdlock):
#   1. `cmake --install` into a prefix: headers and the service's lock.proto (protoc compiles
#      it from there), libdlock.so with its version links, the CMake package, dlock.pc, the
#      tool, its man page and bash completion, and with the service its systemd unit
#      (systemd-analyze verify, where there is one);
#   2. a separate project (tests/consumer) built with find_package(dlock) and with
#      pkg-config against that prefix, and run against a node the installed `dlock sandbox`
#      starts;
#   3. add_subdirectory: only the library is built (static here), and its install rules
#      (DLOCK_INSTALL=ON) give a static prefix that find_package also builds against;
#   4. the Debian package (cpack): as root, `dpkg -i`, the consumer built against /usr, then
#      `dpkg -P` (skipped with a notice when not root or without dpkg).
# Usage: bash scripts/check-install.sh [BUILD_DIR]      (default build/dev)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
build=$(realpath "${1:-build/dev}")
work=$(mktemp -d)
sandbox_pid=""
cleanup() {
  if [ -n "$sandbox_pid" ]; then kill "$sandbox_pid" 2>/dev/null || true; wait "$sandbox_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
# bash runs no EXIT trap when killed by a signal (test.sh's timeout sends SIGTERM): exit instead.
trap 'exit 143' TERM
trap 'exit 130' INT
step() { printf -- '-- %s\n' "$*"; }
fail() { echo "check-install: $*" >&2; exit 1; }
# Quiet unless it fails: then its output.
quiet() {
  if ! "$@" >"$work/step.log" 2>&1; then
    cat "$work/step.log"
    fail "failed: $*"
  fi
}

step "cmake --install $build --prefix <tmp>"
prefix=$work/prefix
quiet cmake --install "$build" --prefix "$prefix"
libdir=$prefix/lib
for f in include/dlock/dlock.h include/dlock/async.h include/dlock/version.h \
         include/dlock/v1/lock.proto \
         lib/cmake/dlock/dlockConfig.cmake lib/cmake/dlock/dlockConfigVersion.cmake \
         lib/pkgconfig/dlock.pc bin/dlock share/man/man1/dlock.1 \
         share/bash-completion/completions/dlock share/doc/dlock/LICENSE; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
ls "$libdir"/libdlock.so.*.*.* >/dev/null 2>&1 || fail "no versioned libdlock.so"
[ -L "$libdir/libdlock.so" ] || fail "no libdlock.so link"
# Only the public headers and the service's API: nothing of src/ is installed.
extra=$(find "$prefix/include" -type f ! -path "$prefix/include/dlock/*.h" \
          ! -path "$prefix/include/dlock/v1/lock.proto")
[ -z "$extra" ] || fail "unexpected files under include/: $extra"
version=$("$prefix/bin/dlock" --version)
expected=$(sed -n 's/^project(dlock VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[ "$version" = "dlock $expected" ] || fail "dlock --version says '$version', CMakeLists.txt $expected"
grep -q '^\.SS run' "$prefix/share/man/man1/dlock.1" || fail "the man page has no 'run' section"
grep -q -- '--kill-after' "$prefix/share/man/man1/dlock.1" || fail "the man page lacks run's options"
grep -q '^\.SS acquire' "$prefix/share/man/man1/dlock.1" || fail "the man page has no 'acquire' section"

step "the installed lock.proto and the service's systemd unit"
# Clients generate their stubs from the installed file alone (as the service tests do).
quiet protoc -I "$prefix/include" --python_out "$work" "$prefix/include/dlock/v1/lock.proto"
[ -s "$work/dlock/v1/lock_pb2.py" ] || fail "protoc made nothing of the installed lock.proto"
unit=$prefix/lib/systemd/system/dlock.service
if "$prefix/bin/dlock" serve --help >/dev/null 2>&1; then
  [ -e "$unit" ] || fail "not installed: lib/systemd/system/dlock.service"
  grep -qx "ExecStart=$prefix/bin/dlock serve \$DLOCK_SERVE_ARGS" "$unit" ||
    fail "the unit does not start the prefix's dlock serve: $(grep ExecStart "$unit")"
  if command -v systemd-analyze >/dev/null; then
    # --man=no: its Documentation=man:dlock(1) is the prefix's page, checked above (and a
    # machine without man(1) would fail the check for that alone).
    quiet systemd-analyze verify --man=no "$unit"
  fi
else
  [ ! -e "$unit" ] || fail "a dlock without serve installs a systemd unit"
fi

step "bash completion"
completions=$(PATH="$prefix/bin:$PATH" bash -c '
  source "$1/share/bash-completion/completions/dlock"
  COMP_WORDS=(dlock ru); COMP_CWORD=1; _dlock; echo "${COMPREPLY[*]}"
  COMP_WORDS=(dlock run --ki); COMP_CWORD=2; _dlock; echo "${COMPREPLY[*]}"
  COMP_WORDS=(dlock run job -- ls --ki); COMP_CWORD=5; _dlock; echo "[${COMPREPLY[*]}]"' _ "$prefix")
# After "--" the words are the COMMAND's: none of dlock's options are offered there.
[ "$completions" = $'run\n--kill-after\n[]' ] || fail "completion gave: $completions"

step "a node from the installed dlock sandbox"
"$prefix/bin/dlock" sandbox --nodes 1 >"$work/sandbox.out" 2>&1 &
sandbox_pid=$!
for _ in $(seq 100); do
  grep -q '^DLOCK_REDIS=' "$work/sandbox.out" && break
  sleep 0.1
done
node=$(sed -n 's/^DLOCK_REDIS=//p' "$work/sandbox.out" | head -n1)
[ -n "$node" ] || { cat "$work/sandbox.out"; fail "the sandbox printed no DLOCK_REDIS"; }

step "consumer: find_package(dlock) against the prefix"
quiet cmake -S tests/consumer -B "$work/find" -G Ninja -DCMAKE_PREFIX_PATH="$prefix"
quiet cmake --build "$work/find"
LD_LIBRARY_PATH="$libdir" "$work/find/dlock_consumer" "$node"
# The shared library keeps its dependencies to itself: nothing in its exported target names
# them (a NEEDED check would miss it under --as-needed), and the consumer does not link them.
if grep -E 'hiredis|OpenSSL|HIREDIS|uriparser|URIPARSER' "$prefix"/lib/cmake/dlock/dlockTargets*.cmake; then
  fail "the installed shared dlock::dlock passes its dependencies on to consumers"
fi
if readelf -d "$work/find/dlock_consumer" | grep -E 'NEEDED.*(hiredis|libssl|liburiparser)'; then
  fail "the consumer of a shared libdlock links dlock's dependencies"
fi

step "consumer: pkg-config --cflags --libs dlock"
flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs dlock)
# shellcheck disable=SC2086
c++ -std=c++20 tests/consumer/consumer.cc -o "$work/pc_consumer" $flags -Wl,-rpath,"$libdir"
"$work/pc_consumer" "$node"

step "add_subdirectory: the library only, static; then its install and find_package"
# DLOCK_UNITY (cmake/BuildSpeed.cmake; off by default in a subproject): the same library in
# fewer, larger files, 80 -> 59 s here on 2 cores (this project's check, not a user's choice).
quiet cmake -S tests/consumer -B "$work/sub" -G Ninja -DDLOCK_SOURCE_DIR="$repo" -DDLOCK_INSTALL=ON \
  -DDLOCK_UNITY=ON
targets=$(cmake --build "$work/sub" --target help)
for t in dlock_tool unit_tests dlock_bench basic_lock; do
  if grep -q "^$t:" <<<"$targets"; then fail "a subproject build defines $t"; fi
done
grep -q '^dlock:' <<<"$targets" || fail "a subproject build lacks the dlock library"
quiet cmake --build "$work/sub" -j "$(nproc)"
"$work/sub/dlock_consumer" "$node"
quiet cmake --install "$work/sub/dlock" --prefix "$work/static"
[ -e "$work/static/lib/libdlock.a" ] || fail "no libdlock.a in the static install"
quiet cmake -S tests/consumer -B "$work/find_static" -G Ninja -DCMAKE_PREFIX_PATH="$work/static"
quiet cmake --build "$work/find_static"
"$work/find_static/dlock_consumer" "$node"
flags=$(PKG_CONFIG_PATH="$work/static/lib/pkgconfig" pkg-config --static --cflags --libs dlock)
# shellcheck disable=SC2086
c++ -std=c++20 tests/consumer/consumer.cc -o "$work/pc_static" $flags
"$work/pc_static" "$node"

if ! command -v dpkg-deb >/dev/null; then
  echo "   (no dpkg: the Debian package is not checked)"
  step "install checks passed"
  exit 0
fi
step "Debian package (cpack -G DEB)"
(cd "$work" && quiet cpack -G DEB --config "$build/CPackConfig.cmake")
deb=$(ls "$work"/dlock_*.deb)
dpkg-deb --contents "$deb" | grep './usr/bin/dlock$' >/dev/null || fail "the package has no /usr/bin/dlock"
dpkg-deb --contents "$deb" | grep './usr/include/dlock/v1/lock.proto$' >/dev/null ||
  fail "the package has no /usr/include/dlock/v1/lock.proto"
if [ -e "$unit" ]; then
  dpkg-deb --contents "$deb" | grep './usr/lib/systemd/system/dlock.service$' >/dev/null ||
    fail "the package has no /usr/lib/systemd/system/dlock.service"
fi
if [ "$(id -u)" -eq 0 ] && ! dpkg-query -W dlock >/dev/null 2>&1; then
  # Purged on every way out from here, also when dpkg -i fails half-way.
  trap 'dpkg -P dlock >/dev/null 2>&1 || true; cleanup' EXIT
  quiet dpkg -i "$deb"
  [ "$(/usr/bin/dlock --version)" = "dlock $expected" ] || fail "the packaged dlock --version"
  if [ -e "$unit" ]; then
    # shellcheck disable=SC2016 # the unit's own $DLOCK_SERVE_ARGS, expanded by systemd
    grep -qx 'ExecStart=/usr/bin/dlock serve $DLOCK_SERVE_ARGS' /usr/lib/systemd/system/dlock.service ||
      fail "the packaged unit does not start /usr/bin/dlock serve"
  fi
  # The package's files, not a dlock installed elsewhere (/usr/local) that the defaults would find.
  quiet cmake -S tests/consumer -B "$work/deb" -G Ninja -Ddlock_DIR=/usr/lib/cmake/dlock
  quiet cmake --build "$work/deb"
  "$work/deb/dlock_consumer" "$node"
  flags=$(PKG_CONFIG_LIBDIR=/usr/lib/pkgconfig pkg-config --cflags --libs dlock)
  # shellcheck disable=SC2086
  c++ -std=c++20 tests/consumer/consumer.cc -o "$work/deb_pc" $flags
  "$work/deb_pc" "$node"
  quiet dpkg -P dlock
  [ ! -e /usr/bin/dlock ] || fail "dpkg -P left /usr/bin/dlock"
else
  echo "   (not root, or a dlock package already installed: dpkg -i skipped)"
fi
step "install checks passed"
