# The shell functions both start scripts (server-start.sh, sentinel-start.sh)
# begin with. The instance is in the environment: INSTANCE (the servers' pod
# name prefix and the name the Sentinels monitor it by), MAX_SERVERS,
# SERVER_PORT, SENTINEL_NAME (the Sentinels' pod name prefix), SENTINELS,
# SENTINEL_PORT, and DOMAIN, under which every pod has its host name.
#
# Every call is bounded (valkey-cli -t 1: one second per connection), so a
# Sentinel or server that is gone costs a second, not a hang. REDISCLI_AUTH
# carries the password: Sentinels require the servers' password too.

# cli is valkey-cli, over TLS when the instance speaks it: with TLS_CA_FILE,
# and TLS_CERT_FILE and TLS_KEY_FILE when clients must present a certificate.
cli() {
  if [ -n "${TLS_CERT_FILE:-}" ]; then
    set -- --cert "$TLS_CERT_FILE" --key "$TLS_KEY_FILE" "$@"
  fi
  if [ -n "${TLS_CA_FILE:-}" ]; then
    set -- --tls --cacert "$TLS_CA_FILE" "$@"
  fi
  valkey-cli "$@"
}

# sentinel_view prints the primary most of the reachable Sentinels name (a
# host name), or nothing when none knows one.
sentinel_view() {
  i=0
  while [ "$i" -lt "$SENTINELS" ]; do
    cli --no-auth-warning -t 1 -h "$SENTINEL_NAME-$i.$DOMAIN" -p "$SENTINEL_PORT" SENTINEL get-master-addr-by-name "$INSTANCE" 2>/dev/null | head -n 1
    i=$((i + 1))
  done | grep -v -e '^$' -e ' ' | sort | uniq -c | sort -rn | awk 'NR == 1 { print $2 }'
}

# servers prints the host names of the servers that exist now, in ordinal
# order. How many servers there are is not in the environment: a value there
# would be in the pod template, and every scale would restart every pod. The
# servers are found by name instead. A server pod's name resolves (the
# headless Service publishes not-ready addresses) from when the pod has an
# address until it is deleted, so the servers are the ordinals whose names
# resolve, among all MAX_SERVERS ordinals spec.replicas allows. Every ordinal
# is tried, not only up to the first that does not resolve: one in the middle
# may be away (its pod being replaced, or pending while its node is gone)
# while higher ones run. The ordinals a scale-in removed stop resolving once
# their pods are deleted. A name that does not resolve costs a DNS answer,
# not a connection timeout. The Sentinels are no source for this: a server
# asks the servers exactly when no Sentinel knows the primary.
servers() {
  i=0
  while [ "$i" -lt "$MAX_SERVERS" ]; do
    if getent hosts "$INSTANCE-$i.$DOMAIN" >/dev/null; then
      echo "$INSTANCE-$i.$DOMAIN"
    fi
    i=$((i + 1))
  done
}

# server_primary prints the first other server than $self that says it is
# primary.
server_primary() {
  for host in $(servers); do
    if [ "$host" != "${self:-}" ] && cli --no-auth-warning -t 1 -h "$host" -p "$SERVER_PORT" INFO replication 2>/dev/null | grep -q '^role:master'; then
      echo "$host"
      return
    fi
  done
}
