#!/usr/bin/env bash
# A private instance of Debian's dockerd for the test bed's scripts: the image
# builder of e2e/images/build.sh and the daemon of kind's nodes (e2e/kind/kind.sh).
# Each has its own socket, exec root, data root and cgroup parent. None touches the
# host's firewall (no iptables, no masquerade, no default bridge), which the offline
# cluster's bridge shares.
#
#   e2e/images/dockerd.sh start RUN DATA CGROUP LOG [dockerd args...]
#   e2e/images/dockerd.sh stop RUN CGROUP
#
# RUN holds docker.sock, dockerd.pid and the exec root, and is removed on stop; DATA
# is the data root, kept between runs (images, build cache); CGROUP names the cgroup
# parent of the containers; LOG gets dockerd's output. start returns at once when the
# daemon of RUN already answers.
set -euo pipefail

start() {
  local run=$1 data=$2 cgroup=$3 log=$4
  shift 4
  mkdir -p "$run" "$(dirname "$log")"
  if [[ -S $run/docker.sock ]] && /usr/bin/docker -H "unix://$run/docker.sock" version >/dev/null 2>&1; then return; fi
  echo "dockerd.sh: starting a private dockerd on $run/docker.sock" >&2
  # The VM cannot lower oom_score_adj (no CAP_SYS_RESOURCE) and caps nofile at 20000.
  # fd 9 is a caller's lock (build.sh's): the daemon must not hold it.
  setsid /usr/sbin/dockerd \
    --host "unix://$run/docker.sock" --pidfile "$run/dockerd.pid" --data-root "$data" --exec-root "$run/exec" \
    --iptables=false --ip-masq=false --bridge=none --oom-score-adjust=0 --cgroup-parent="/$cgroup" \
    --default-ulimit nofile=20000:20000 --log-level=warn "$@" \
    >"$log" 2>&1 </dev/null 9>&- &
  for _ in $(seq 100); do
    /usr/bin/docker -H "unix://$run/docker.sock" version >/dev/null 2>&1 && return
    sleep 0.2
  done
  echo "dockerd.sh: dockerd did not start; see $log" >&2
  exit 1
}

stop() {
  local run=$1 cgroup=$2 pid
  pid=$(cat "$run/dockerd.pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 150); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  findmnt -rn -o TARGET | grep "^$run/" | sort -ru | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf --one-file-system "$run"
  # cgroup v2, or every v1 hierarchy
  rmdir "/sys/fs/cgroup/$cgroup" /sys/fs/cgroup/*/"$cgroup" 2>/dev/null || true
}

usage() {
  echo "usage: $0 start RUN DATA CGROUP LOG [dockerd args...] | stop RUN CGROUP" >&2
  exit 2
}
case ${1:-} in
  start) (($# >= 5)) || usage ;;
  stop) (($# == 3)) || usage ;;
  *) usage ;;
esac
"$@"
