#!/usr/bin/env bash
# Fetch cert-manager's CRDs at a pinned version for tests, never committed:
# they come from the cert-manager Go module (through the Go module proxy,
# checksummed by the Go checksum database) and land in
# bin/crds/cert-manager/<version>/. Prints that directory. The operator
# applies Certificates as unstructured objects and does not link
# cert-manager's Go module; envtest installs these CRDs so that the API server
# validates what the operator applies against cert-manager's real schema.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
version=${CERT_MANAGER_VERSION:-v1.21.2}
out=$repo/bin/crds/cert-manager/$version
if [[ ! -f $out/.complete ]]; then
  dir=$(cd "$repo" && GOFLAGS=-mod=mod go mod download -json "github.com/cert-manager/cert-manager@$version" |
    awk -F'"' '$2 == "Dir" {print $4}')
  mkdir -p "$out"
  cp "$dir"/deploy/crds/cert-manager.io_{certificates,issuers,clusterissuers}.yaml "$out/"
  chmod 0644 "$out"/*.yaml
  touch "$out/.complete"
fi
echo "$out"
