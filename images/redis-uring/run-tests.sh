#!/usr/bin/env bash
# Run the server tests against the build tree:
#  - upstream Tcl suites (AOF + config sanity) with the default engine, and
#    with the uring engine forced in both ack modes (runtest --config adds the
#    options to every server the suites start; the suites are not edited);
#  - our own Tcl tests (tests/uring-*.tcl), copied into the tree as uring/*.
#
#   run-tests.sh BUILD_TREE DENY_IO_URING_LAUNCHER
#
# Prints a final "N passed, N failed" line; exits non-zero on any failure.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
tree=$1
export DENY_IO_URING=$2
clients=${TEST_CLIENTS:-2}
logs=${TEST_LOGS:-$tree/../test-logs}
upstream=(integration/aof integration/aof-multi-part integration/aof-race unit/introspection)
# runtest finds free ports by probing, which races with another run started at
# the same moment (a second checkout's make test): give each run its own range.
baseport=${TEST_BASEPORT:-$((21111 + RANDOM % 20 * 1000))}

mkdir -p "$tree/tests/uring" "$logs"
rm -f "$tree"/tests/uring/*.tcl
cp "$here"/tests/uring-*.tcl "$tree/tests/uring/"
ours=()
for f in "$here"/tests/uring-*.tcl; do ours+=("uring/$(basename "$f" .tcl)"); done

passed=0
failed=0
failures=()

# run NAME ARGS...: one runtest invocation; counts its [ok]/[err] lines, and a
# run that crashes or exits non-zero without an [err] line counts as a failure.
run() {
  local name=$1 log="$logs/$1.log" rc ok err
  shift
  echo "== $name: runtest $*"
  (cd "$tree" && ./runtest --clients "$clients" --timeout 600 --baseport "$baseport" --portcount 1000 "$@") >"$log" 2>&1
  rc=$?
  # runtest colours its output even into a file.
  sed -i 's/\x1b\[[0-9;]*m//g' "$log"
  ok=$(grep -c '^\[ok\]:' "$log")
  err=$(grep -cE '^\[(err|exception|timeout)\]:' "$log")
  if [[ $rc -ne 0 && $err -eq 0 ]]; then err=1; fi
  passed=$((passed + ok))
  failed=$((failed + err))
  echo "   $ok passed, $err failed (rc $rc, log $log)"
  if [[ $err -ne 0 ]]; then
    failures+=("$name")
    grep -E -A3 '^\[(err|exception|timeout)\]:' "$log" | head -40
  fi
}

singles=()
for s in "${upstream[@]}"; do singles+=(--single "$s"); done
own=()
for s in "${ours[@]}"; do own+=(--single "$s"); done

start=$(date +%s)
run upstream-posix "${singles[@]}"
run upstream-uring-durable "${singles[@]}" --config appendfsync-engine uring --config aof-uring-ack durable
run upstream-uring-fast "${singles[@]}" --config appendfsync-engine uring --config aof-uring-ack fast
run ours "${own[@]}"
echo "server tests took $(($(date +%s) - start)) s${failures[*]:+; failing runs: ${failures[*]}}"
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
