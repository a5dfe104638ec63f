#!/usr/bin/env bash
# Run the harness, then sweep what it may have left behind, however it ended:
#
#   run.sh WORK_DIR HARNESS SUBCOMMAND [FLAGS...]
#
# The harness removes its servers, mounts, loop devices and images itself on
# every exit it sees (return, failed check, panic in main, SIGINT/SIGTERM).
# The sweep covers the rest (SIGKILL, a panic in another goroutine): under the
# run's scratch directory WORK_DIR/run-<harness pid> only, it kills what still
# uses a mount, unmounts it, detaches loop devices backed by its image files
# and stops the fusedisk daemons serving it. Concurrent runs (other pids) are
# left alone. Exits with the harness' status.
set -uo pipefail

work=$1
shift
"$@" &
pid=$!
# A non-interactive shell starts background jobs with SIGINT ignored: pass
# the signal on, then keep waiting while the harness cleans up.
trap 'kill -TERM $pid 2>/dev/null' INT TERM
while :; do
  wait "$pid"
  rc=$?
  kill -0 "$pid" 2>/dev/null || break
done

dir=$(realpath -m "$work/run-$pid")
[[ -d $dir ]] || exit "$rc"
left=0
while read -r m; do
  [[ $m == "$dir"/* ]] || continue
  left=1
  fuser -km "$m" >/dev/null 2>&1
  umount "$m" 2>/dev/null || umount -l "$m"
done < <(findmnt -rn -o TARGET | sort -r)
while read -r dev back; do
  [[ $back == "$dir"/* ]] || continue
  left=1
  losetup -d "$dev"
done < <(losetup --list --noheadings --raw --output NAME,BACK-FILE)
# fusedisk daemons serving the run's fuse and gp3 volumes (their backing
# directories are under it); unmounted above, they may still be exiting.
pkill -KILL -f -- " $dir/[^ ]*\.backing " && left=1
rm -rf "$dir"
[[ $left -eq 0 ]] || echo "run.sh: removed mounts/loop devices the harness left under $dir" >&2
exit "$rc"
