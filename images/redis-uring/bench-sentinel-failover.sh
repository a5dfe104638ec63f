#!/usr/bin/env bash
# How long a Sentinel failover leaves clients without a primary: the time from
# SENTINEL FAILOVER to the moment SENTINEL GET-MASTER-ADDR-BY-NAME names the new
# primary (what a client that follows the Sentinels, and the operator, wait for).
#
#   bench-sentinel-failover.sh BIN_DIR [BASELINE_BIN_DIR]
#
# One primary, two replicas and one Sentinel (quorum 1) on loopback, FAILOVERS
# failovers in a row (default 8), each once the Sentinel sees the new primary and
# both replicas again. With a baseline, its servers and this build's run
# alternately, ROUNDS rounds (default 2), and the medians are set side by side.
set -euo pipefail

bin=${1:?usage: bench-sentinel-failover.sh BIN_DIR [BASELINE_BIN_DIR]}
baseline=${2:-}
failovers=${FAILOVERS:-8}
rounds=${ROUNDS:-2}
cli=$bin/valkey-cli
ports=(7391 7392 7393)
sentinel_port=27391
work=$(mktemp -d)
stop() {
  for p in "${ports[@]}" "$sentinel_port"; do "$cli" -p "$p" shutdown nosave >/dev/null 2>&1 || true; done
}
trap 'stop; rm -rf "$work"' EXIT

field() { # field NAME: the value after NAME in a SENTINEL MASTER/REPLICAS reply on stdin
  awk -v name="$1" 'prev == name {print} {prev = $0}'
}

# run BIN_DIR: prints one failover time in ms per line.
run() {
  local server=$1/valkey-server dir=$work/run
  rm -rf "$dir" && mkdir -p "$dir"
  for p in "${ports[@]}"; do
    mkdir -p "$dir/$p"
    local args=(--port "$p" --dir "$dir/$p" --save "" --appendonly no --daemonize yes --logfile "$dir/$p/log")
    [[ $p == "${ports[0]}" ]] || args+=(--replicaof 127.0.0.1 "${ports[0]}")
    "$server" "${args[@]}"
  done
  printf 'port %s\nsentinel monitor m 127.0.0.1 %s 1\nsentinel down-after-milliseconds m 5000\nsentinel failover-timeout m 10000\n' \
    "$sentinel_port" "${ports[0]}" >"$dir/sentinel.conf"
  "$server" "$dir/sentinel.conf" --sentinel --daemonize yes --logfile "$dir/sentinel.log" --dir "$dir"
  local s=("$cli" -p "$sentinel_port") i old t0 t1 deadline
  for ((i = 0; i < failovers; i++)); do
    deadline=$((SECONDS + 60))
    until [[ $("${s[@]}" sentinel master m 2>/dev/null | field flags) == master &&
      $("${s[@]}" sentinel replicas m 2>/dev/null | field flags | grep -cx slave) == 2 ]]; do
      ((SECONDS < deadline)) || { echo "bench-sentinel-failover: the Sentinel did not see a primary and two replicas within 60 s" >&2; exit 1; }
      sleep 0.1
    done
    # The failover starts from a Sentinel at rest, as a switchover does.
    sleep 2
    old=$("${s[@]}" sentinel get-master-addr-by-name m | tail -1)
    t0=$(date +%s%N)
    "${s[@]}" sentinel failover m >/dev/null
    while [[ $("${s[@]}" sentinel get-master-addr-by-name m | tail -1) == "$old" ]]; do sleep 0.005; done
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000000))
  done
  stop
}

median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }

: >"$work/this" && : >"$work/baseline"
for ((r = 0; r < rounds; r++)); do
  [[ -z $baseline ]] || run "$baseline" | tee -a "$work/baseline" | sed 's/^/baseline: failover ms /'
  run "$bin" | tee -a "$work/this" | sed 's/^/this build: failover ms /'
done
this=$(median <"$work/this")
echo "SENTINEL FAILOVER -> new address: this build median ${this} ms over $((rounds * failovers)) failovers (min $(sort -n "$work/this" | head -1), max $(sort -n "$work/this" | tail -1))"
if [[ -n $baseline ]]; then
  base=$(median <"$work/baseline")
  echo "baseline median ${base} ms (min $(sort -n "$work/baseline" | head -1), max $(sort -n "$work/baseline" | tail -1)); this build / baseline = $(awk -v a="$this" -v b="$base" 'BEGIN {printf "%.2f", a / b}')"
fi
