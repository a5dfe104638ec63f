#!/usr/bin/env bash
# Fetch prometheus and promtool from Debian trixie's `prometheus` and `promtool` packages into
# bin/prometheus/<version>/ for tests and `promtool check rules`: the package is
# downloaded and unpacked, never installed (no service, no host changes).
# Prints that directory.
set -euo pipefail
version=${PROMETHEUS_DEB_VERSION:-2.53.3+ds1-2}
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/bin/prometheus/$version
if [[ ! -f $out/.complete ]]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && "$repo/hack/apt-trixie.sh" -qq download "prometheus=$version" "promtool=$version" >&2)
  for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
  mkdir -p "$out"
  cp "$work/root/usr/bin/prometheus" "$work/root/usr/bin/promtool" "$out/"
  touch "$out/.complete"
fi
echo "$out"
