#!/usr/bin/env bash
# Fetch the Prometheus Operator CRDs at a pinned version for tests, never
# committed: they come from the prometheus-operator Go module (through the Go
# module proxy, checksummed by go.sum's database) and land in
# bin/crds/prometheus-operator/<version>/. Prints that directory. The version
# is the one of the PodMonitor API types go.mod requires, so the operator's
# types and the CRDs the tests install cannot drift apart.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
version=${PROMETHEUS_OPERATOR_VERSION:-$(awk '$1 == "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring" {print $2}' "$repo/go.mod")}
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
