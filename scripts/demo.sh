#!/usr/bin/env bash
# The README's first command: builds dlock, starts 5 local redis-server processes, and runs 6
# worker processes that increment a shared file counter under `dlock run`, killing 2 of the 5
# nodes midway. The counter must come out exact. Everything it starts, it stops.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
DLOCK=$PWD/build/release/tools/dlock/dlock
work=$(mktemp -d /tmp/dlock-demo-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

ports=()
for i in 1 2 3 4 5; do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$work" \
    --logfile "$work/redis-$port.log" &
  pids+=($!)
  ports+=("$port")
done
urls=$(printf 'redis://127.0.0.1:%s,' "${ports[@]}")
export DLOCK_REDIS=${urls%,}
for port in "${ports[@]}"; do
  until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
done
echo "5 nodes up: $DLOCK_REDIS"

workers=6 rounds=20
echo 0 >"$work/counter"
body="n=\$(cat $work/counter); sleep 0.01; echo \$((n+1)) > $work/counter"
start=$(date +%s.%N)
worker_pids=()
for w in $(seq "$workers"); do
  (for r in $(seq "$rounds"); do "$DLOCK" run -t 5s -w 60s counter -- sh -c "$body" || echo "worker $w: dlock run failed ($?)"; done) &
  worker_pids+=($!)
done
until (($(cat "$work/counter") >= workers * rounds / 3)); do sleep 0.05; done
echo "counter at $(cat "$work/counter"): killing nodes 2 and 4 (kill -9)"
kill -9 "${pids[1]}" "${pids[3]}"
wait "${pids[1]}" "${pids[3]}" 2>/dev/null || true
for p in "${worker_pids[@]}"; do wait "$p"; done
elapsed=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
final=$(cat "$work/counter")
echo "counter = $final, expected $((workers * rounds)) (${workers} processes x ${rounds} rounds, ${elapsed}s)"
"$DLOCK" status counter || true
if ((final == workers * rounds)); then echo "OK: no lost update"; else echo "FAIL: lost updates"; exit 1; fi
