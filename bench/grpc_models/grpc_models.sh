#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gRPC 1.51's server models with an empty unary call, apart from dlock (docs/performance.md,
# "gRPC's server models"): builds grpc_models.cc against Debian's libgrpc++ (not part of the
# CMake build: a question about gRPC, asked again when gRPC changes), starts one server per
# model pinned to SERVER_CPUS, and drives them all from one client pinned to CLIENT_CPUS, BLOCK
# calls to each in turn for ROUNDS rounds, with the blocking stub and with a completion queue.
# Then, per model, the server's CPU time per call (/proc/PID/stat, every thread) over a run
# of 4,000 calls of its own.
#
#   bash bench/grpc_models/grpc_models.sh [SERVER_CPUS [CLIENT_CPUS [BLOCK [ROUNDS]]]]
#   (default: 0 0 200 10, everything on CPU 0 as dlock_bench places it)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
server_cpus="${1:-0}"
client_cpus="${2:-0}"
block="${3:-200}"
rounds="${4:-10}"
out="${TMPDIR:-/tmp}/dlock-grpc-models"
mkdir -p "$out"
bin="$out/grpc_models"
if [ ! -x "$bin" ] || [ "$here/grpc_models.cc" -nt "$bin" ] || [ "$here/grpc_models.proto" -nt "$bin" ]; then
  cp "$here/grpc_models.proto" "$out/"
  (
    cd "$out"
    protoc --cpp_out=. --grpc_out=. --plugin=protoc-gen-grpc="$(command -v grpc_cpp_plugin)" \
      grpc_models.proto
    # shellcheck disable=SC2046 # pkg-config's flags are words
    g++ -std=c++20 -O2 -I. "$here/grpc_models.cc" grpc_models.pb.cc grpc_models.grpc.pb.cc \
      -o grpc_models $(pkg-config --cflags --libs grpc++ protobuf) -lgrpc++_reflection
  )
fi

models=("cb post refl icpt" "cq post refl icpt" "cq post refl icpt busy=50" "cb post" "cq post"
  "cb refl icpt" "cq refl icpt")
pids=()
specs=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
for i in "${!models[@]}"; do
  port=$((17900 + i))
  # shellcheck disable=SC2086
  taskset -c "$server_cpus" "$bin" server ${models[$i]%% *} "$port" ${models[$i]#* } \
    >"$out/server.$port.log" 2>&1 &
  pids+=($!)
  echo "port $port: ${models[$i]}"
  specs+=("sync:$port" "cq:$port")
done
for port in $(seq 17900 $((17900 + ${#models[@]} - 1))); do
  until grep -q listening "$out/server.$port.log" 2>/dev/null; do sleep 0.1; done
done
taskset -c "$client_cpus" "$bin" client "$block" "$rounds" "${specs[@]}"

echo "server CPU per call (all its threads, over 4,000 blocking calls):"
for i in "${!models[@]}"; do
  pid="${pids[$i]}"
  before=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  taskset -c "$client_cpus" "$bin" client 4000 0 "sync:$((17900 + i))" >/dev/null
  after=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  echo "  ${models[$i]}: $(((after - before) * 1000000 / $(getconf CLK_TCK) / 4000)) µs"
done
