# Starts a server of a replicated instance as the primary or as a replica of
# it, decided at every start of the container (lookups.sh precedes this):
#
#  1. the primary most reachable Sentinels name;
#  2. when no Sentinel knows one (a new instance, or every Sentinel
#     restarted), another server that says it is primary;
#  3. when none does, ordinal 0 starts as primary and the others replicate it.
#
# A server the Sentinels still name as primary after it lost its volume (a
# new claim, or mode: none, which keeps nothing) must not start as an empty
# primary: its replicas would copy the empty dataset. While a Sentinel sees a
# healthy replica it waits, not listening, so that the Sentinels find it down
# and promote that replica; it then starts as a replica of it. With no
# healthy replica there is nothing to wait for, and it starts as primary.
#
# Besides what lookups.sh reads: POD_NAME, DATA_DIR and CONFIG_FILE.
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

primary=$(sentinel_view)
[ -n "$primary" ] || primary=$(server_primary)
if [ -z "$primary" ] && [ "$ordinal" != 0 ]; then
  primary="$INSTANCE-0.$DOMAIN"
fi
while [ "$primary" = "$self" ] && ! has_data && [ "$(healthy_replicas)" -gt 0 ]; do
  echo "the Sentinels name this server primary, its volume holds no data and a replica does: waiting for them to promote the replica"
  sleep 2
  primary=$(sentinel_view)
done
if [ -n "$primary" ] && [ "$primary" != "$self" ]; then
  echo "starting as a replica of $primary"
  set -- --replicaof "$primary" "$SERVER_PORT"
else
  echo "starting as the primary"
  set --
fi
exec valkey-server "$CONFIG_FILE" --replica-announce-ip "$self" "$@"
