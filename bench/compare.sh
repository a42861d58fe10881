#!/usr/bin/env bash
# Two builds of dlock_bench against each other, on the same servers, alternately, round by round
# (a change's cost where bench/run.sh's full run would take too long, or where the machine's
# speed drifts between two full runs: the ratio of two neighbouring measurements is what counts).
# Per round and binary: the mean uncontended cycle on 1 node and on 5 nodes (blocking API, the
# process's whole run, start included), the asio API's cycles per second with 64 in flight on 1
# node (3 s), and the Redis CPU per cycle of that run (INFO cpu), and the Redis CPU per cycle of
# the asio API with one in flight (3 s, the first server moved to CPU 0 meanwhile; issue 32's
# other row). Then the median of each. The
# clients run on CPU 0, the 5 redis-servers (free ports, no persistence, stopped at the end) on
# CPU 1: absolute times are not bench/run.sh's.
#
#   bash bench/compare.sh OLD/dlock_bench NEW/dlock_bench [ROUNDS]      (default 5 rounds)
#
# e.g. OLD from `git worktree add /tmp/old <commit>` built with `cmake --preset release`.
set -euo pipefail

old=$1
new=$2
rounds=${3:-5}
for bin in "$old" "$new"; do
  [[ -x $bin ]] || { echo "compare.sh: no $bin" >&2; exit 64; }
done
command -v taskset >/dev/null || { echo "compare.sh: needs taskset (util-linux)" >&2; exit 64; }

# Five consecutive free ports (dlock_bench --nodes 5 takes --port, --port + 1, ...).
base=$(python3 -c '
import socket
for base in range(20000, 60000, 10):
    try:
        ss = [socket.socket() for _ in range(5)]
        for i, s in enumerate(ss): s.bind(("127.0.0.1", base + i))
        print(base); break
    except OSError: pass
    finally:
        for s in ss: s.close()')
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
for i in 0 1 2 3 4; do
  taskset -c 1 redis-server --port $((base + i)) --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize no >/dev/null &
  pids+=($!)
done
for i in 0 1 2 3 4; do
  until redis-cli -p $((base + i)) ping >/dev/null 2>&1; do sleep 0.1; done
done

cpu_seconds() {
  redis-cli -p "$base" info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.6f", s }'
}
seconds_of() { /usr/bin/time -f %e "$@" 2>&1 >/dev/null | tail -1; }

results=$(mktemp)
for round in $(seq 1 "$rounds"); do
  for which in old new; do
    bin=${!which}
    redis-cli -p "$base" flushall >/dev/null
    one=$(seconds_of taskset -c 0 "$bin" cycles --impl dlock --port "$base" --count 3000)
    five=$(seconds_of taskset -c 0 "$bin" cycles --impl dlock --port "$base" --nodes 5 --count 1000)
    before=$(cpu_seconds)
    run=$(taskset -c 0 "$bin" cycles --impl dlock --port "$base" --count 0 --inflight 64 --async)
    after=$(cpu_seconds)
    # One in flight as bench/run.sh measures it: the server on the client's CPU (across CPUs,
    # waking the idle one on every request costs more than the script).
    taskset -pc 0 "${pids[0]}" >/dev/null
    lone_before=$(cpu_seconds)
    lone=$(taskset -c 0 "$bin" cycles --impl dlock --port "$base" --count 0 --inflight 1 --async)
    lone_after=$(cpu_seconds)
    taskset -pc 1 "${pids[0]}" >/dev/null
    awk -v w="$which" -v r="$round" -v one="$one" -v five="$five" -v b="$before" -v a="$after" \
      -v run="$run" -v lone="$lone" -v lb="$lone_before" -v la="$lone_after" 'BEGIN {
        split(run, f, " "); per_s = f[1]; cycles = f[4]
        split(lone, g, " ")
        printf "%s %d %.1f %.1f %.0f %.2f %.2f\n", w, r, one * 1e6 / 3000, five * 1e6 / 1000,
               per_s, (a - b) * 1e6 / cycles, (la - lb) * 1e6 / g[4] }' | tee -a "$results"
  done
done
echo "median of $rounds rounds: 1-node cycle µs, 5-node cycle µs, asio 64 in flight cycles/s, Redis CPU µs per cycle (64 in flight; 1 in flight)"
for which in old new; do
  line="$which:"
  for col in 3 4 5 6 7; do
    line+=" $(awk -v w="$which" -v c="$col" '$1 == w { print $c }' "$results" | sort -g |
      awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')"
  done
  echo "$line"
done
rm -f "$results"
