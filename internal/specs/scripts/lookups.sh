# The shell functions both start scripts (server-start.sh, sentinel-start.sh)
# begin with. The instance is in the environment: INSTANCE (the servers' pod
# name prefix and the name the Sentinels monitor it by), SERVERS,
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

# server_primary prints the first other server than $self that says it is
# primary.
server_primary() {
  i=0
  while [ "$i" -lt "$SERVERS" ]; do
    host="$INSTANCE-$i.$DOMAIN"
    if [ "$host" != "${self:-}" ] && cli --no-auth-warning -t 1 -h "$host" -p "$SERVER_PORT" INFO replication 2>/dev/null | grep -q '^role:master'; then
      echo "$host"
      return
    fi
    i=$((i + 1))
  done
}
