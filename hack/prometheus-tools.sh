#!/usr/bin/env bash
# Fetch prometheus and promtool from Debian trixie's `prometheus` and `promtool` packages into
# bin/prometheus/<version>/ for tests and `promtool check rules`: the package is
# downloaded and unpacked, never installed (no service, no host changes).
# Prints that directory.
set -euo pipefail
version=${PROMETHEUS_DEB_VERSION:-2.53.3+ds1-2}
# sha256 of the pinned amd64 .debs, fetched from the pool first (trixie's index moves on
# with updates); an overridden version goes through apt only.
prometheus_sha256=58c3e6a86c56cb3bfd71032fa48d65945d526441a212f5815dfe5ed9cb787ecc
promtool_sha256=ff27654eacc95abd846d344e91fe4ba3b4f0588a50d606ed1d2f09ad3408722f
[[ -z ${PROMETHEUS_DEB_VERSION:-} ]] || prometheus_sha256=
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/bin/prometheus/$version
if [[ ! -f $out/.complete ]]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  # shellcheck disable=SC2015 # apt is the fallback whenever the pool fetch is skipped or fails
  (cd "$work" && {
    [[ -n $prometheus_sha256 ]] &&
      "$repo/hack/apt-trixie.sh" pool "main/p/prometheus/prometheus_${version}_amd64.deb" "$prometheus_sha256" &&
      "$repo/hack/apt-trixie.sh" pool "main/p/prometheus/promtool_${version}_amd64.deb" "$promtool_sha256"
  } || "$repo/hack/apt-trixie.sh" -qq download "prometheus=$version" "promtool=$version" >&2)
  for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
  mkdir -p "$out"
  cp "$work/root/usr/bin/prometheus" "$work/root/usr/bin/promtool" "$out/"
  touch "$out/.complete"
fi
echo "$out"
