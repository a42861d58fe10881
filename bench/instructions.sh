#!/usr/bin/env bash
# Client instructions and allocations per uncontended lock cycle, by callgrind (issue 32): dlock's
# blocking API (Client::try_lock + Lease::unlock), dlock's asio API (async_try_lock +
# async_unlock, one in flight) and the raw hiredis floor (SET NX PX + compare-and-delete by
# EVALSHA, bench/raw_client.cc), each against one local redis-server that this script starts on
# a free port and stops by pid.
#
# Instruction counts do not depend on how busy the machine is, so this can run on a shared
# machine where wall times mean little. Each implementation runs twice, with N1 and N2 cycles;
# (total(N2) - total(N1)) / (N2 - N1) is the cost of one cycle, with connecting, loading
# scripts and exiting cancelled out. Allocations are the calls to malloc and calloc that
# callgrind counted (operator new calls malloc), the same difference.
#
#   bash bench/instructions.sh [path/to/dlock_bench]     (default: build/dev/bench/dlock_bench)
#
# Environment: N1, N2 (default 2000, 4000); KEEP=dir keeps the callgrind outputs there, for
# `callgrind_annotate --inclusive=yes dir/dlock-4000.out`.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
bench=${1:-$here/build/dev/bench/dlock_bench}
n1=${N1:-2000}
n2=${N2:-4000}
[[ -x $bench ]] || { echo "instructions.sh: no $bench (build the dlock_bench target)" >&2; exit 64; }
command -v valgrind >/dev/null || { echo "instructions.sh: needs valgrind (apt-get install -y valgrind)" >&2; exit 64; }

out=${KEEP:-$(mktemp -d)}
mkdir -p "$out"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
  >"$out/redis.log" 2>&1 &
redis_pid=$!
cleanup() {
  kill "$redis_pid" 2>/dev/null || true
  wait "$redis_pid" 2>/dev/null || true
  [[ -n ${KEEP:-} ]] || rm -rf "$out"
}
trap cleanup EXIT
for _ in $(seq 100); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.05
done

# total <label> <cycles> <dlock_bench cycles arguments...>: "instructions allocations".
total() {
  local label=$1 n=$2
  shift 2
  local file="$out/$label-$n.out" try
  # dlock runs with node_timeout 10 s: under valgrind on a busy machine the first greeting can
  # miss the default 200 ms. Up to 3 tries all the same (a run that succeeds counts the same
  # instructions as any other).
  for try in 1 2 3; do
    valgrind --tool=callgrind --compress-strings=no --callgrind-out-file="$file" \
      "$bench" cycles --port "$port" --count "$n" "$@" >"$out/$label-$n.log" 2>&1 && break
    echo "instructions.sh: $label ($n cycles) failed (try $try of 3):" >&2
    grep -v '^==' "$out/$label-$n.log" >&2
    [[ $try -lt 3 ]] || return 1
  done
  # The summary line has the instructions; each call record is "cfn=<callee>" then
  # "calls=<count> ...".
  awk '/^(summary|totals):/ { ir = $2 }
       /^cfn=/ { callee = substr($0, 5) }
       /^calls=/ && (callee == "malloc" || callee == "calloc") { split($1, c, "="); allocs += c[2] }
       END { printf "%d %d\n", ir, allocs }' "$file"
}

# per_cycle <label> <dlock_bench cycles arguments...>: "instructions allocations" per cycle.
per_cycle() {
  local label=$1
  shift
  local a b t1 t2
  t1=$(total "$label" "$n1" "$@") || exit 1
  t2=$(total "$label" "$n2" "$@") || exit 1
  read -r -a a <<<"$t1"
  read -r -a b <<<"$t2"
  awk -v i1="${a[0]}" -v i2="${b[0]}" -v m1="${a[1]}" -v m2="${b[1]}" -v d=$((n2 - n1)) \
    'BEGIN { printf "%.0f %.2f\n", (i2 - i1) / d, (m2 - m1) / d }'
}

raw=$(per_cycle raw --impl raw)
blocking=$(per_cycle dlock --impl dlock --node-timeout 10000)
async=$(per_cycle dlock-async --impl dlock --async --node-timeout 10000)
read -r raw_ir raw_alloc <<<"$raw"
read -r blk_ir blk_alloc <<<"$blocking"
read -r asy_ir asy_alloc <<<"$async"

echo "Client per uncontended cycle, 1 node, callgrind ($n1 and $n2 cycles; $(git -C "$here" rev-parse --short HEAD 2>/dev/null))"
printf '| %-28s | %12s | %10s | %11s |\n' "client" "instructions" "vs hiredis" "allocations"
printf '|%s|%s|%s|%s|\n' "------------------------------" "-------------:" "----------:" "------------:"
row() { awk -v l="$1" -v i="$2" -v r="$raw_ir" -v a="$3" 'BEGIN { printf "| %-28s | %12d | %9.2fx | %11.2f |\n", l, i, i / r, a }'; }
row "raw hiredis floor" "$raw_ir" "$raw_alloc"
row "dlock blocking (try_lock)" "$blk_ir" "$blk_alloc"
row "dlock asio (async_try_lock)" "$asy_ir" "$asy_alloc"
