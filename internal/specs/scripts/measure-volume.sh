# Reports the filesystem under DATA_DIR (from mountinfo: statfs cannot tell
# ext4 from ext2/3) as the container's termination message, then measures the
# volume for FSPROBE_MILLIS with uring-redis-fsprobe where the image has it:
# an image built before the probe reports the filesystem only, and a probe
# that fails does not keep the server from starting.
set -eu
fs=$(awk -v dir="$DATA_DIR" '$5 == dir { for (i = 7; $i != "-"; i++) {}; fs = $(i + 1) } END { print fs }' /proc/self/mountinfo)
printf 'filesystem=%s\n' "${fs:-unknown}" >/dev/termination-log
if command -v uring-redis-fsprobe >/dev/null; then
  uring-redis-fsprobe -t "$FSPROBE_MILLIS" "$DATA_DIR" >>/dev/termination-log || true
fi
