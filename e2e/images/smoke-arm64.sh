#!/usr/bin/env bash
# The linux/arm64 server image, run on this amd64 host under qemu-user (binfmt_misc):
#
#   e2e/images/smoke-arm64.sh        (make smoke-arm64; hack/release.sh runs it too)
#
# Builds the image (e2e/images/build.sh with PLATFORMS=linux/arm64: redis-uring:local-arm64,
# or REDIS_IMG-arm64, which after a release's build is the image it pushed), then, in
# containers of the builder's private dockerd:
#  1. posix engine, appendfsync always: the server answers PING, takes $keys SETs and an
#     INCR per SET, is killed with SIGKILL, starts again on the same volume, and every
#     key is back, loaded from the AOF (the log says so; no RDB is ever written);
#  2. appendfsync-engine uring (and io-uring-replies yes): qemu-user has no io_uring,
#     so the engine must fall back to posix and say why (INFO and the log), and the
#     AOF still takes writes and reloads them.
# Every valkey-cli runs in the container too: both binaries are arm64. Exits non-zero
# at the first check that fails, with the server's log.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=$repo/bin/e2e/images
run=/run/uring-e2e/docker
docker=(/usr/bin/docker -H "unix://$run/docker.sock")
image=${REDIS_IMG:-redis-uring:local}-arm64
keys=${SMOKE_KEYS:-1000}
name=uring-smoke-arm64
log() { echo "smoke-arm64: $*" >&2; }

start=$SECONDS
E2E_KEEP_BUILDER=1 PLATFORMS=linux/arm64 "$here/build.sh" redis-uring
log "image built in $((SECONDS - start))s"
# The builder is ours until the end (build.sh's lock), then stopped unless
# E2E_KEEP_BUILDER asks to leave it to the next call, as build.sh does.
exec 9>"$cache/build.lock"
flock 9
cleanup() {
  "${docker[@]}" rm -f "$name" >/dev/null 2>&1 || true
  "${docker[@]}" volume rm -f "$name" >/dev/null 2>&1 || true
  [[ -n ${E2E_KEEP_BUILDER:-} ]] || "$here/dockerd.sh" stop "$run" uring-e2e-docker
}
trap cleanup EXIT

fail() {
  log "FAIL: $*"
  "${docker[@]}" logs --tail 40 "$name" >&2 || true
  exit 1
}
cli() { "${docker[@]}" exec -i "$name" valkey-cli "$@"; }
# Wait up to 10 s for a line in the server's log (docker copies it asynchronously) and
# print it. Read whole, not piped into grep -q: its early exit would fail the pipe.
logged() {
  local t0=$SECONDS logs
  until logs=$("${docker[@]}" logs "$name" 2>&1) && grep -m1 -F "$1" <<<"$logs"; do
    ((SECONDS - t0 < 10)) || return 1
    sleep 0.5
  done
}
info() { cli INFO persistence | tr -d '\r' | sed -n "s/^$1://p"; }

# Start the server on the volume with these options; wait for PONG.
serve() {
  "${docker[@]}" rm -f "$name" >/dev/null 2>&1 || true
  # This dockerd's run has no --platform, and warns that the image is not the host's.
  "${docker[@]}" run -d --name "$name" --network none --security-opt seccomp=unconfined \
    -v "$name:/data" "$image" --dir /data --save '' --appendonly yes "$@" \
    2> >(grep -v 'does not match the detected host platform' >&2) >/dev/null
  local t0=$SECONDS
  until [[ $(cli PING 2>/dev/null) == PONG ]]; do
    ((SECONDS - t0 < 60)) || fail "no PONG within 60s"
    "${docker[@]}" inspect -f '{{.State.Running}}' "$name" | grep -qx true || fail "the server exited"
    sleep 0.5
  done
}

# $keys SETs and INCRs in one pipe; each acknowledged after its fdatasync (always).
write_keys() {
  local prefix=$1
  seq "$keys" | awk -v p="$prefix" '{print "SET " p ":" $1 " v" $1; print "INCR " p ":count"}' | cli >/dev/null
  [[ $(cli GET "$prefix:count") == "$keys" ]] || fail "INCR $prefix:count did not reach $keys"
}

# SIGKILL, start again with the same options, and find every key.
kill_and_reload() {
  local prefix=$1
  shift
  "${docker[@]}" kill "$name" >/dev/null
  serve "$@"
  logged 'DB loaded from append only file' >/dev/null || fail "the restarted server did not say it loaded the AOF"
  [[ $(cli GET "$prefix:count") == "$keys" ]] || fail "$prefix:count is $(cli GET "$prefix:count") after the reload, not $keys"
  [[ $(cli GET "$prefix:$keys") == "v$keys" ]] || fail "$prefix:$keys is missing after the reload"
  [[ $(cli EXISTS "$prefix:1") == 1 ]] || fail "$prefix:1 is missing after the reload"
}

"${docker[@]}" volume rm -f "$name" >/dev/null 2>&1 || true
arch=$("${docker[@]}" image inspect -f '{{.Architecture}}' "$image")
[[ $arch == arm64 ]] || fail "$image is $arch, not arm64"

t0=$SECONDS
serve --appendfsync always --appendfsync-engine posix
machine=$("${docker[@]}" exec "$name" uname -m)
[[ $machine == aarch64 ]] || fail "the container's machine is $machine, not aarch64"
log "posix: PONG from $("${docker[@]}" exec "$name" valkey-server --version | grep -o 'v=[^ ]*') on $machine (qemu-user) after $((SECONDS - t0))s"
[[ $(info aof_engine) == posix ]] || fail "aof_engine is $(info aof_engine), not posix"
t0=$SECONDS
write_keys posix
log "posix: $keys SETs and $keys INCRs with appendfsync always in $((SECONDS - t0))s"
t0=$SECONDS
kill_and_reload posix --appendfsync always --appendfsync-engine posix
log "posix: SIGKILL, restart, every key reloaded from the AOF in $((SECONDS - t0))s"

t0=$SECONDS
serve --appendfsync always --appendfsync-engine uring --io-uring-replies yes
engine=$(info aof_engine) active=$(info aof_uring_active) reason=$(info aof_uring_fallback_reason)
replies_reason=$(cli INFO | tr -d '\r' | sed -n 's/^io_uring_replies_fallback_reason://p')
said=$(logged 'io_uring AOF engine unavailable' || true)
log "uring: aof_engine:$engine aof_uring_active:$active aof_uring_fallback_reason:$reason io_uring_replies_fallback_reason:$replies_reason"
log "uring: the log says: ${said#*# }"
[[ $engine == uring ]] || fail "aof_engine is $engine, not uring"
[[ $active == 0 && $reason != none && $reason != not_built && -n $said ]] ||
  fail "expected the engine to fall back under qemu-user and report why (active $active, reason $reason)"
write_keys uring
kill_and_reload uring --appendfsync always --appendfsync-engine uring --io-uring-replies yes
[[ $(cli GET posix:count) == "$keys" ]] || fail "the posix run's keys are gone"
log "uring: fell back to posix ($reason); $keys SETs and INCRs, SIGKILL, every key reloaded, in $((SECONDS - t0))s"
log "passed in $((SECONDS - start))s"
