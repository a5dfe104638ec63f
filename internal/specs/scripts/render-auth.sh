# Writes the server's auth include file, RUN_DIR/auth.conf, from the
# environment: the password (REDIS_PASSWORD) and the ACL users of the exporter,
# the benchmark runner and the backup agent (NAME, PASSWORD and ACL rules each), so no password
# lands in the ConfigMap or on a command line. Without a password it writes
# nothing. Then the users include file, RUN_DIR/users.conf, always: the
# "user" lines of spec.users (USERS_ACL, password hashes only), empty without.
set -eu
# quote escapes a value for a double-quoted redis.conf argument.
quote() { printf '%s' "$1" | sed 's/[\\"]/\\&/g'; }
user() { [ -z "$1" ] || printf 'user %s on ">%s" %s\n' "$1" "$(quote "$2")" "$3"; }
umask 077
if [ -n "${REDIS_PASSWORD:-}" ]; then
  pw=$(quote "$REDIS_PASSWORD")
  { printf 'requirepass "%s"\nprimaryauth "%s"\n' "$pw" "$pw"
    user "${EXPORTER_USER:-}" "${EXPORTER_PASSWORD:-}" "${EXPORTER_ACL:-}"
    user "${BENCHMARK_USER:-}" "${BENCHMARK_PASSWORD:-}" "${BENCHMARK_ACL:-}"
    user "${BACKUP_USER:-}" "${BACKUP_PASSWORD:-}" "${BACKUP_ACL:-}"
  } >"$RUN_DIR/auth.conf"
fi
printf '%s' "${USERS_ACL:-}" >"$RUN_DIR/users.conf"
