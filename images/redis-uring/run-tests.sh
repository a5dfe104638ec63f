#!/usr/bin/env bash
# Run the server tests against the build tree:
#  - upstream Tcl suites with the default engine, and with the uring engine
#    forced in both ack modes (runtest --config adds the options to every
#    server the suites start; the suites are not edited):
#      * the AOF suites and introspection (they turn the AOF on themselves),
#        and once more in durable mode with aof-uring-direct-writes no;
#      * a broad subset run with the AOF on: strings, expire, keyspace, MULTI,
#        scripting, functions, blocking lists and streams, pub/sub, tracking,
#        sort, info, WAIT/WAITAOF (posix: appendfsync always, the mode uring durable is
#        measured against);
#  - upstream's networking-related suites (replies, protocol, pipelines,
#    output-buffer limits, client eviction, pub/sub, tracking, blocking lists)
#    with io-uring-replies on;
#  - upstream's TLS suite, the AOF suite and a replication suite over TLS
#    (runtest --tls, certificates from upstream's utils/gen-test-certs.sh)
#    with the uring engine in durable mode: the image is built with
#    BUILD_TLS=yes and spec.tls serves clients and replicas only over TLS;
#  - our own Tcl tests (tests/uring-*.tcl), copied into the tree as uring/*,
#    once as they are and once with io-uring-replies on (durable mode's held
#    clients are then released through the replies ring).
#
#   run-tests.sh BUILD_TREE DENY_IO_URING_LAUNCHER [ci|full]
#
# full: the whole upstream suite (./runtest, every unit) with the AOF on, once
# per uring ack mode, instead of the subsets (make test-server-full; about an
# hour per mode here; TEST_FULL_MODES=durable or =fast runs one;
# TEST_FULL_TLS=yes runs it with every client, replica and Sentinel on TLS,
# runtest --tls, which is how a spec.tls instance serves). Upstream
# tests that cannot hold with the engine forced are skipped by name below,
# each with its reason, printed at every run. Never run two runtests in one
# tree at once: each one's cleanup deletes the other's server directories
# (the "cat: ./tests/tmp/server.N/stderr: No such file" exception).
# Prints a final "N passed, N failed" line; exits non-zero on any failure.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
tree=$1
export DENY_IO_URING=$2
clients=${TEST_CLIENTS:-2}
logs=${TEST_LOGS:-$tree/../test-logs}
suite=${3:-ci}
upstream=(integration/aof integration/aof-multi-part integration/aof-race unit/introspection)
subset=(unit/type/string unit/type/incr unit/expire unit/keyspace unit/multi unit/scripting unit/functions
  unit/type/list unit/type/stream-cgroups unit/pubsub unit/tracking unit/sort unit/info unit/wait)
replies=(unit/networking unit/protocol unit/client-eviction unit/obuf-limits unit/info unit/querybuf
  unit/replybufsize unit/quit unit/pubsub unit/tracking unit/limits unit/pause unit/introspection unit/type/list)
tls=(unit/tls integration/aof integration/replication-2)
replies_on=(--config io-uring-replies yes)
aof_on=(--config appendonly yes)
durable=(--config appendfsync-engine uring --config aof-uring-ack durable)
fast=(--config appendfsync-engine uring --config aof-uring-ack fast)
fdatasync=(--config appendfsync-engine uring --config aof-uring-ack durable --config aof-uring-direct-writes no)
# Upstream tests whose premise the forced configuration changes: "name|reason".
# Each was checked to fail the same way with posix appendfsync always and the
# AOF on (skips_aof_on), or follows from the engine fdatasyncing every batch
# (skips_uring); see docs/measurements.md.
skips_aof_on=(
  "MULTI with config set appendonly|expects CONFIG SET appendonly yes to start a rewrite; the AOF is already on"
  "config during loading|expects to load an RDB; with the AOF on the server loads the AOF"
  "MEMORY commands during loading|expects to load an RDB; with the AOF on the server loads the AOF"
  "SHUTDOWN will abort if rdb save failed on signal|expects SHUTDOWN to depend on the RDB save alone; with the AOF on it does not"
  "SHUTDOWN will abort if rdb save failed on shutdown command|expects SHUTDOWN to depend on the RDB save alone; with the AOF on it does not"
  "SHUTDOWN can proceed if shutdown command was with nosave|follows the two SHUTDOWN tests above"
  "Shutting down master waits for replica then fails|turns the AOF on to start a slow first rewrite that makes SHUTDOWN fail; the AOF is already on"
  "/^corrupt payload: load corrupted rdb|loads a corrupted RDB fixture; with the AOF on the server loads the AOF"
  "/^PSYNC2: Partial resync after (Master )?restart using RDB aux fields|restarts from the RDB's replication aux fields; with the AOF on the restart loads the AOF"
  "PSYNC2: Full resync after Master restart when too many key expired|restarts from the RDB; with the AOF on the restart loads the AOF"
  "test old version rdb file|loads an RDB fixture; with the AOF on the server loads the AOF"
  "RDB encoding loading test|loads an RDB fixture; with the AOF on the server loads the AOF"
  "RDB future version loading, strict version check|loads an RDB fixture; with the AOF on the server loads the AOF"
  "RDB future version loading, relaxed version check|loads an RDB fixture; with the AOF on the server loads the AOF"
  "Server should not start if RDB is corrupted|loads an RDB fixture; with the AOF on the server loads the AOF"
  "client freed during loading|expects an RDB load; with the AOF on the server loads the AOF"
  "Test RDB load info|expects an RDB load; with the AOF on the server loads the AOF"
)
# Whole test files whose premise the forced AOF breaks, "file|reason" (each
# fails the same way with posix always and the AOF on).
rdb_fixture="loads an RDB fixture at startup; with the AOF on the server loads the AOF (one aborts runtest)"
skipunits_aof_on=(
  "integration/convert-zipmap-hash-on-load|$rdb_fixture"
  "integration/convert-ziplist-hash-on-load|$rdb_fixture"
  "integration/convert-ziplist-zset-on-load|$rdb_fixture"
  "integration/corrupt-dump-fuzzer|restarts the server after a crash expecting the corrupt key gone; with the AOF on the restart replays the corrupt RESTORE, the load panics and the test hangs until runtest's timeout"
)
skips_uring=(
  "WAITAOF local copy before fsync|expects appendfsync no to delay the fsync; the uring engine fdatasyncs every batch whatever appendfsync says"
  "WAITAOF local wait and then stop aof|expects appendfsync no to leave WAITAOF blocked; the engine fdatasyncs every batch"
  "WAITAOF local on server with aof disabled|follows the previous test, which turns the AOF off while WAITAOF is blocked"
  "WAITAOF replica copy before fsync|expects the replica's appendfsync no to delay its fsync; its engine fdatasyncs every batch"
  "WAITAOF when replica switches between masters, fsync: no|expects appendfsync no to delay the fsync; the engine fdatasyncs every batch"
  "WAITAOF when replica switches between masters, fsync: everysec|expects the replicas' everysec fsync to hold WAITAOF until after the switch; the engine fdatasyncs every batch and a replica acks it at once"
  "WAIT and WAITAOF replica multiple clients unblock - reuse last result|expects the replicas' appendfsync no to keep WAITAOF blocked; the unpaused replica's engine fdatasyncs and acks at once"
)
skips_durable=()
# With aof-preallocate (the default) the INCR file is zero-written ahead of the
# log, so its size is not the number of bytes written: tests that use it as
# such cannot hold (or hold whatever happens). Their file runs once more
# whole with aof-preallocate no (upstream-posix-no-prealloc; --only would
# still start the servers of the tests it skips, some of which must fail to).
# Durable mode with direct writes (aof-uring-direct-writes, the default): each
# direct write ends in padding annotation lines, which util.tcl's AOF reader
# (read_from_aof) does not skip. Run in durable mode without direct writes
# (upstream-uring-durable-fdatasync), where they pass.
skips_direct=(
  "FLUSHDB / FLUSHALL should persist in AOF|reads the INCR file's commands with util.tcl's read_from_aof, which does not skip annotation lines (a direct write's padding)"
  "All time-to-live(TTL) in commands are propagated as absolute timestamp in milliseconds in AOF|reads the INCR file's commands with util.tcl's read_from_aof, which does not skip annotation lines (a direct write's padding)"
)
skips_prealloc=(
  "AOF fsync always barrier issue|uses the INCR file's size as the bytes written; aof-preallocate keeps the file written ahead of the log"
  "GETEX should not append to AOF|uses the INCR file's size as the bytes written: with aof-preallocate it would pass whatever GETEX appended"
)
# Only in fast mode: these assert that WAITAOF 0 1 finds the primary's own
# fsync done (they set the primary to appendfsync always, which fsyncs before
# replying); fast mode acknowledges first and paces its fdatasyncs (a few
# fsync times), while a replica running the engine acks each batch at once, so
# the answer can be a truthful "0 1".
skips_fast=(
  "/^WAITAOF replica copy everysec|expects the primary's own fsync before a replica's ack; fast mode paces it"
  "WAITAOF replica copy appendfsync always|expects the primary's own fsync before a replica's ack; fast mode paces it"
  "WAITAOF replica copy if replica is blocked|expects the primary's own fsync before a replica's ack; fast mode paces it"
  "WAITAOF replica multiple clients unblock - reuse last result|expects the primary's own fsync before a replica's ack; fast mode paces it"
)
# Only in the whole suite over TLS (TEST_FULL_TLS=yes), with the AOF on: these
# assert used_memory within 4096 B of maxmemory after evicting. used_memory
# includes the AOF buffer's retained allocation (up to 4000 B, which eviction
# does not count, upstream's design); their counted overshoot is ~1.9 KB in
# every configuration, so they pass or fail on that allocation's size, which
# over TLS was 2560 B (uring durable: 11 of 13 failed; posix always: 1 of 13)
# and without TLS 1536 B (all pass). See docs/measurements.md.
skips_tls_aof_on=(
  "/^maxmemory - is the memory limit honoured|asserts used_memory within 4 KiB of maxmemory; with the AOF on that includes the AOF buffer's retained allocation, which eviction does not count (2.5 KiB over TLS)"
  "/^maxmemory - only allkeys-. should remove non-volatile keys|the same assertion on used_memory"
  "/^maxmemory - policy volatile-.* should only remove volatile keys|the same assertion on used_memory"
)
# Everywhere: upstream tests whose assertion is a wall-clock bound tighter
# than a loaded 2-core machine keeps (make test runs these suites beside the
# Go packages, and its checks under load add a busy loop on one core). Speed
# is measured by benchmarks here, not asserted in timed tests.
skips_timed=(
  "BLPOP unblock but the key is expired and then block again - reprocessing command|asserts the re-blocked BLPOP times out 1000-1150 ms after it was sent; beside a CPU hog it took 1158 ms (2026-11-29)"
)
# runtest finds free ports by probing, which races with another run started at
# the same moment (a second checkout's make test): give each run its own range,
# below the kernel's ephemeral ports (ip_local_port_range, 32768 up by default),
# which any process's outgoing connections and port-0 listeners take from. A
# server with cluster-enabled yes also listens on port + 10000 (the cluster
# bus), which runtest does not probe: the range keeps those below 30000 too,
# where a cluster's NodePorts (30000-32767) begin.
# A port found busy at a server's start (most likely its bus port, among the
# ephemeral ones the Go suites' sockets take in make test) makes runtest start
# it again on another port, and that retry waits forever for a "Ready to
# accept" count taken before it truncated the log (upstream's start_server):
# integration/aof's cluster test hung so twice in the loaded runs of
# 2026-11-29, its server idle in epoll_wait.
baseport=${TEST_BASEPORT:-$((10111 + RANDOM % 9 * 1000))}

mkdir -p "$tree/tests/uring" "$logs"
rm -f "$tree"/tests/uring/*.tcl
cp "$here"/tests/uring-*.tcl "$tree/tests/uring/"
ours=()
for f in "$here"/tests/uring-*.tcl; do ours+=("uring/$(basename "$f" .tcl)"); done

passed=0
failed=0
failures=()

# runtest gives up after this many seconds without a test client's report, and
# then kills every server with SIGKILL, stacks unread. A hung run is the one
# whose stacks matter: the watchdog below takes them first.
test_timeout=600
hang_after=${TEST_HANG_AFTER:-$((test_timeout - 90))}

# snapshot_servers NAME: the kernel and user stacks of every server this tree
# runs, and the tail of each one's log, into $logs/NAME.hang.txt.
snapshot_servers() {
  local out="$logs/$1.hang.txt" pid cwd task
  {
    echo "runtest log unchanged for ${hang_after} s at $(date -u +%FT%TZ); the servers of $tree:"
    for pid in $(pgrep -x valkey-server); do
      cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null) || continue
      [[ $cwd == "$tree"/* ]] || continue
      echo "=== pid $pid in $cwd: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
      for task in /proc/"$pid"/task/*; do
        echo "--- task ${task##*/} ($(cat "$task/comm")), state $(awk '{print $3}' "$task/stat"), kernel stack:"
        cat "$task/stack" 2>/dev/null
      done
      if command -v gdb >/dev/null; then
        timeout 60 gdb -q -batch -p "$pid" -ex 'thread apply all bt' 2>&1 | grep -v '^\[New LWP'
      fi
      echo "--- $cwd/stdout (last 40 lines):"
      tail -n 40 "$cwd/stdout" 2>/dev/null
    done
  } >"$out" 2>&1
  echo "   runtest made no progress for ${hang_after} s: server stacks in $out"
}

# watch_hang NAME LOG PID: snapshot the servers once if LOG stops growing for
# hang_after seconds while runtest PID runs. A single test that takes that long
# (none does here) would only cost a snapshot.
watch_hang() {
  local name=$1 log=$2 pid=$3 idle
  while kill -0 "$pid" 2>/dev/null; do
    sleep 10
    idle=$(($(date +%s) - $(stat -c %Y "$log" 2>/dev/null || date +%s)))
    if ((idle >= hang_after)); then
      snapshot_servers "$name"
      return
    fi
  done
}

# run NAME ARGS...: one runtest invocation; counts its [ok]/[err] lines, and a
# run that crashes or exits non-zero without an [err] line counts as a failure.
run() {
  local name=$1 log="$logs/$1.log" rc ok err t0=$SECONDS pid watcher
  shift
  echo "== $name: runtest $*"
  rm -f "$logs/$name.hang.txt"
  (cd "$tree" && exec ./runtest --clients "$clients" --timeout "$test_timeout" --baseport "$baseport" --portcount 1000 "$@") >"$log" 2>&1 &
  pid=$!
  watch_hang "$name" "$log" "$pid" &
  watcher=$!
  wait "$pid"
  rc=$?
  kill "$watcher" 2>/dev/null
  wait "$watcher" 2>/dev/null
  # runtest colours its output even into a file.
  sed -i 's/\x1b\[[0-9;]*m//g' "$log"
  ok=$(grep -c '^\[ok\]:' "$log")
  # [TIMEOUT] is runtest's report of a run that stopped making progress.
  err=$(grep -ciE '^\[(err|exception|timeout)\]:' "$log")
  if [[ $rc -ne 0 && $err -eq 0 ]]; then err=1; fi
  passed=$((passed + ok))
  failed=$((failed + err))
  echo "   $ok passed, $err failed in $((SECONDS - t0)) s (rc $rc, log $log)"
  if [[ $err -ne 0 ]]; then
    failures+=("$name")
    grep -iE -A3 '^\[(err|exception|timeout)\]:' "$log" | sed -n 1,40p # reads all: no SIGPIPE under pipefail
    if [[ -f $logs/$name.hang.txt ]]; then
      echo "   the servers' stacks when it hung: $logs/$name.hang.txt"
    fi
  fi
}

# add_skips ARRAY ENTRY...: append --skiptest NAME for each "name|reason".
add_skips() {
  local -n out=$1
  shift
  local entry
  for entry in "$@"; do out+=(--skiptest "${entry%%|*}"); done
}

singles=()
for s in "${upstream[@]}"; do singles+=(--single "$s"); done
broad=()
for s in "${subset[@]}"; do broad+=(--single "$s"); done
networking=()
for s in "${replies[@]}"; do networking+=(--single "$s"); done
own=()
for s in "${ours[@]}"; do own+=(--single "$s"); done
over_tls=()
for s in "${tls[@]}"; do over_tls+=(--single "$s"); done
skip_pre=()
add_skips skip_pre "${skips_prealloc[@]}"
skip_on=()
add_skips skip_on "${skips_aof_on[@]}" "${skips_prealloc[@]}" "${skips_timed[@]}"
skip_fast=()
add_skips skip_fast "${skips_aof_on[@]}" "${skips_uring[@]}" "${skips_fast[@]}" "${skips_prealloc[@]}" "${skips_timed[@]}"
skip_timed=()
add_skips skip_timed "${skips_timed[@]}"
skip_direct=()
add_skips skip_direct "${skips_prealloc[@]}" "${skips_direct[@]}"
skip_durable=()
add_skips skip_durable "${skips_aof_on[@]}" "${skips_uring[@]}" "${skips_durable[@]}" "${skips_prealloc[@]}" \
  "${skips_direct[@]}" "${skips_timed[@]}"
skip_units=()
for entry in "${skipunits_aof_on[@]}"; do skip_units+=(--skipunit "${entry%%|*}"); done
for entry in "${skips_aof_on[@]}" "${skips_uring[@]}" "${skips_durable[@]}"; do
  echo "skipped upstream test: ${entry%%|*} (${entry#*|})"
done
for entry in "${skips_prealloc[@]}"; do
  echo "skipped upstream test with aof-preallocate yes, run with it off: ${entry%%|*} (${entry#*|})"
done
for entry in "${skips_fast[@]}"; do
  echo "skipped upstream test in fast mode: ${entry%%|*} (${entry#*|})"
done
for entry in "${skips_direct[@]}"; do
  echo "skipped upstream test in durable mode with direct writes: ${entry%%|*} (${entry#*|})"
done
for entry in "${skips_timed[@]}"; do
  echo "skipped upstream timed test: ${entry%%|*} (${entry#*|})"
done

# Upstream's script writes tests/tls/ (a CA, server, client and replica
# certificates) with openssl; runtest --tls reads them from there.
tls_certs() {
  [[ -f $tree/tests/tls/ca.crt ]] || (cd "$tree" && ./utils/gen-test-certs.sh >"$logs/gen-test-certs.log" 2>&1)
}

start=$(date +%s)
if [[ $suite == full ]]; then
  for entry in "${skipunits_aof_on[@]}"; do
    echo "skipped upstream test file: ${entry%%|*} (${entry#*|})"
  done
  over=() suffix=
  if [[ ${TEST_FULL_TLS:-no} == yes ]]; then
    tls_certs
    over=(--tls) suffix=-tls
    add_skips over "${skips_tls_aof_on[@]}"
    for entry in "${skips_tls_aof_on[@]}"; do
      echo "skipped upstream test over TLS: ${entry%%|*} (${entry#*|})"
    done
  fi
  for mode in ${TEST_FULL_MODES:-durable fast}; do
    case $mode in
      durable) run "full-uring-durable$suffix" "${over[@]}" "${aof_on[@]}" "${durable[@]}" "${skip_durable[@]}" "${skip_units[@]}" ;;
      fast) run "full-uring-fast$suffix" "${over[@]}" "${aof_on[@]}" "${fast[@]}" "${skip_fast[@]}" "${skip_units[@]}" ;;
      *) echo "TEST_FULL_MODES: unknown mode $mode (durable, fast)" >&2; exit 2 ;;
    esac
  done
else
  run upstream-posix "${singles[@]}" "${skip_pre[@]}"
  run upstream-posix-no-prealloc --single integration/aof --config aof-preallocate no
  run upstream-uring-durable "${singles[@]}" "${durable[@]}" "${skip_direct[@]}"
  run upstream-uring-durable-fdatasync "${singles[@]}" "${fdatasync[@]}" "${skip_pre[@]}"
  run upstream-uring-fast "${singles[@]}" "${fast[@]}" "${skip_pre[@]}"
  run subset-posix-always "${broad[@]}" "${aof_on[@]}" --config appendfsync always "${skip_on[@]}"
  run subset-uring-durable "${broad[@]}" "${aof_on[@]}" "${durable[@]}" "${skip_durable[@]}"
  run subset-uring-fast "${broad[@]}" "${aof_on[@]}" "${fast[@]}" "${skip_fast[@]}"
  run networking-uring-replies "${networking[@]}" "${replies_on[@]}" "${skip_timed[@]}"
  tls_certs
  run tls-uring-durable --tls "${over_tls[@]}" "${durable[@]}" "${skip_direct[@]}"
fi
run ours "${own[@]}"
run ours-uring-replies "${own[@]}" "${replies_on[@]}"
echo "server tests took $(($(date +%s) - start)) s${failures[*]:+; failing runs: ${failures[*]}}"
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
