#!/usr/bin/env bash
# Render benchmark results as PNG charts (internal/benchreport).
#
#   hack/bench-report.sh                      # benchmark local servers in four modes, then render
#   BENCHMARK=name [NAMESPACE=ns] hack/bench-report.sh   # a RedisBenchmark, read with kubectl
#   RESULTS=file hack/bench-report.sh         # a saved RedisBenchmark JSON or runner results
#
# The local run starts the project's server (bin/redis-uring) four times on
# loopback ports, data on this machine's disk under bin/bench-report/, and
# drives each in turn with the real runner (cmd/bench) and valkey-benchmark:
# aof-always, aof-everysec, uring-durable and uring-fast. REQUESTS and CLIENTS
# size it. The PNG goes to OUT (default bin/bench-report/bench-report.png).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$repo/bin/bench-report
out=${OUT:-$work/bench-report.png}
mkdir -p "$work"
report() { go run "$repo/internal/benchreport/cmd/bench-report" -in "$1" -out "$out" ${TITLE:+-title "$TITLE"}; echo "$out"; }

if [[ -n ${RESULTS:-} ]]; then
  report "$RESULTS"
  exit
fi
if [[ -n ${BENCHMARK:-} ]]; then
  kubectl get redisbenchmarks.persistence.uringredis.io "$BENCHMARK" ${NAMESPACE:+-n "$NAMESPACE"} -o json >"$work/$BENCHMARK.json"
  report "$work/$BENCHMARK.json"
  exit
fi

bin=$repo/bin/redis-uring/install/bin
[[ -x $bin/valkey-server ]] || { echo "bench-report: build the server first (make server-build)" >&2; exit 1; }
go build -o "$work/bench" "$repo/cmd/bench"
declare -A modes=(
  [aof-always]="appendfsync always"
  [aof-everysec]="appendfsync everysec"
  [uring-durable]=$'appendfsync always\nappendfsync-engine uring\naof-uring-ack durable'
  [uring-fast]=$'appendfsync always\nappendfsync-engine uring\naof-uring-ack fast'
)
results=$work/local-results.jsonl
: >"$results"
port=16700
pids=()
stop_servers() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop_servers EXIT
for mode in aof-always aof-everysec uring-durable uring-fast; do
  port=$((port + 1))
  dir=$work/$mode
  rm -rf "$dir" && mkdir -p "$dir"
  printf 'bind 127.0.0.1\nport %d\ndir %s\nsave ""\nappendonly yes\n%s\nlogfile %s/server.log\n' "$port" "$dir" "${modes[$mode]}" "$dir" >"$dir/redis.conf"
  "$bin/valkey-server" "$dir/redis.conf" &
  pids+=($!)
  for _ in $(seq 50); do "$bin/valkey-cli" -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  echo "bench-report: $mode" >&2
  "$work/bench" --addr "127.0.0.1:$port" --target "$mode" --mode "$mode" --tool "$bin/valkey-benchmark" \
    --requests "${REQUESTS:-100000}" --clients "${CLIENTS:-50}" --mixed-reads \
    --termination-log= >>"$results"
  kill "${pids[-1]}"
  wait "${pids[-1]}" 2>/dev/null || true
done
TITLE=${TITLE:-"Persistence modes compared on $(hostname) ($(uname -r), ext4), ${REQUESTS:-100000} requests, ${CLIENTS:-50} clients"} report "$results"
