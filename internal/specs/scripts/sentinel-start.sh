# Writes the Sentinel's configuration into SENTINEL_DIR (Sentinel rewrites its
# file with what it learns) on the pod's first start and keeps it across
# container restarts. A new Sentinel monitors the primary the other Sentinels
# name, else a server that says it is primary, else ordinal 0: the same order
# the servers follow (lookups.sh precedes this).
#
# Besides what lookups.sh reads: POD_NAME; SENTINEL_LISTEN, the lines that
# say where the Sentinel listens; QUORUM, DOWN_AFTER_MILLIS and
# FAILOVER_TIMEOUT_MILLIS; REDIS_PASSWORD when the servers have one.
set -eu
self="$POD_NAME.$DOMAIN"
conf="$SENTINEL_DIR/sentinel.conf"
umask 077
# auth_lines prints the password lines, quoted for the config parser.
auth_lines() {
  if [ -n "${REDIS_PASSWORD:-}" ]; then
    pw=$(printf '%s' "$REDIS_PASSWORD" | sed 's/[\\"]/\\&/g')
    printf 'sentinel auth-pass %s "%s"\nrequirepass "%s"\n' "$INSTANCE" "$pw" "$pw"
  fi
}
if [ -s "$conf" ]; then
  # Sentinel rewrites its file without quoting the passwords (Valkey 8.1.1
  # writes sentinel auth-pass and requirepass as they are), so a password
  # with a quote, a backslash or a space would not read back: the lines are
  # written again at every start, which also applies a changed password.
  # sentinel-pass, which the operator sets while it rotates the password,
  # goes too: without it a Sentinel signs in to the others with requirepass.
  grep -v -e '^sentinel auth-pass ' -e '^requirepass ' -e '^sentinel sentinel-pass ' \
    -e '^# ??? sentinel auth-pass ' -e '^# ??? requirepass ' -e '^# ??? sentinel sentinel-pass ' "$conf" >"$conf.new" || true
  auth_lines >>"$conf.new"
  mv "$conf.new" "$conf"
else
  primary=$(sentinel_view)
  [ -n "$primary" ] || primary=$(server_primary)
  [ -n "$primary" ] || primary="$INSTANCE-0.$DOMAIN"
  # Sentinel refuses a primary whose name does not resolve yet.
  until getent hosts "$primary" >/dev/null; do
    echo "waiting for $primary to resolve"
    sleep 1
  done
  {
    printf '%s\n' "$SENTINEL_LISTEN"
    echo "dir $SENTINEL_DIR"
    echo "sentinel resolve-hostnames yes"
    echo "sentinel announce-hostnames yes"
    echo "sentinel announce-ip $self"
    echo "sentinel monitor $INSTANCE $primary $SERVER_PORT $QUORUM"
    echo "sentinel down-after-milliseconds $INSTANCE $DOWN_AFTER_MILLIS"
    echo "sentinel failover-timeout $INSTANCE $FAILOVER_TIMEOUT_MILLIS"
    echo "sentinel parallel-syncs $INSTANCE 1"
    auth_lines
  } >"$conf"
fi
exec valkey-sentinel "$conf"
