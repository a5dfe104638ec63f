#!/usr/bin/env bash
# Fetch the Prometheus Operator CRDs at a pinned version for tests, never
# committed: they come from the prometheus-operator Go module (through the Go
# module proxy, checksummed by go.sum's database) and land in
# bin/crds/prometheus-operator/<version>/. Prints that directory.
set -euo pipefail
version=${PROMETHEUS_OPERATOR_VERSION:-v0.77.1}
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/bin/crds/prometheus-operator/$version
if [[ ! -f $out/.complete ]]; then
  dir=$(cd "$repo" && GOFLAGS=-mod=mod go mod download -json "github.com/prometheus-operator/prometheus-operator@$version" |
    awk -F'"' '$2 == "Dir" {print $4}')
  mkdir -p "$out"
  cp "$dir"/example/prometheus-operator-crd/monitoring.coreos.com_{podmonitors,servicemonitors,prometheusrules}.yaml "$out/"
  chmod 0644 "$out"/*.yaml
  touch "$out/.complete"
fi
echo "$out"
