# Starts a server of a replicated instance as the primary or as a replica of
# it, decided at every start of the container (lookups.sh precedes this):
#
#  1. the primary most reachable Sentinels name;
#  2. when no Sentinel knows one (a new instance, or every Sentinel
#     restarted), another server that says it is primary;
#  3. when none does, ordinal 0 starts as primary and the others replicate it.
#
# A server that would start as the primary (the Sentinels still name it, or
# none answers and it is ordinal 0) after it lost its volume (a new claim, or
# mode: none, which keeps nothing) must not start as an empty primary: its
# replicas would copy the empty dataset. While a Sentinel sees a healthy
# replica, or another server answers as a replica that holds data, it waits,
# not listening, so that the Sentinels find it down and promote a replica; it
# then starts as a replica of that one. Only with no replica holding data is
# there nothing to wait for, and it starts as primary. Waiting is the choice
# when the Sentinels cannot be asked: an empty primary would wipe the
# replicas, and the Sentinels come back (they are a StatefulSet).
#
# Besides what lookups.sh reads: POD_NAME, DATA_DIR, CONFIG_FILE and
# USERS_INCLUDE (the users include file the prepare container writes).
set -eu
self="$POD_NAME.$DOMAIN"
ordinal="${POD_NAME##*-}"
# healthy_replicas prints how many replicas a Sentinel sees up.
healthy_replicas() {
  i=0
  while [ "$i" -lt "$SENTINELS" ]; do
    if out=$(cli --no-auth-warning -t 1 -h "$SENTINEL_NAME-$i.$DOMAIN" -p "$SENTINEL_PORT" SENTINEL replicas "$INSTANCE" 2>/dev/null); then
      printf '%s\n' "$out" | awk 'prev == "flags" && ($0 == "slave" || $0 == "replica") { n++ } { prev = $0 } END { print n + 0 }'
      return
    fi
    i=$((i + 1))
  done
  echo 0
}
has_data() { [ -e "$DATA_DIR/dump.rdb" ] || [ -d "$DATA_DIR/appendonlydir" ]; }
# replica_with_data prints the first other server that answers as a replica
# and has received data (slave_repl_offset above 0), or nothing.
replica_with_data() {
  for host in $(servers); do
    if [ "$host" != "$self" ] && cli --no-auth-warning -t 1 -h "$host" -p "$SERVER_PORT" INFO replication 2>/dev/null |
      tr -d '\r' | awk -F: '$1 == "role" && $2 == "slave" { r = 1 } $1 == "slave_repl_offset" && $2 > 0 { o = 1 } END { exit !(r && o) }'; then
      echo "$host"
      return
    fi
  done
}

primary=$(sentinel_view)
[ -n "$primary" ] || primary=$(server_primary)
if [ -z "$primary" ] && [ "$ordinal" != 0 ]; then
  primary="$INSTANCE-0.$DOMAIN"
fi
while { [ -z "$primary" ] || [ "$primary" = "$self" ]; } && ! has_data; do
  if [ "$(healthy_replicas)" -gt 0 ]; then
    why="a replica does"
  elif holder=$(replica_with_data) && [ -n "$holder" ]; then
    why="$holder, a replica, does (no Sentinel knows a healthy one)"
  else
    break
  fi
  echo "this server would start as the primary, its volume holds no data and $why: waiting for the Sentinels to promote a replica"
  sleep 2
  primary=$(sentinel_view)
  [ -n "$primary" ] || primary=$(server_primary)
done
if [ -n "$primary" ] && [ "$primary" != "$self" ]; then
  echo "starting as a replica of $primary"
  set -- --replicaof "$primary" "$SERVER_PORT"
else
  echo "starting as the primary"
  set --
fi
exec valkey-server "$CONFIG_FILE" --include "$USERS_INCLUDE" --replica-announce-ip "$self" "$@"
