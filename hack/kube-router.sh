#!/usr/bin/env bash
# Build kube-router at the version pinned in e2e/kube-router/go.mod into
# bin/kube-router/<version>/ with the host's Go toolchain: the NetworkPolicy
# enforcer of both e2e clusters (e2e/cluster/cluster.sh runs it on the offline
# node, e2e/kind/kind.sh puts it in the kind node image). Prints the binary's path.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
module=$repo/e2e/kube-router
version=$(awk '$1 == "require" && $2 == "github.com/cloudnativelabs/kube-router/v2" {print $3}' "$module/go.mod")
out=$repo/bin/kube-router/$version/kube-router
if [[ ! -x $out ]]; then
  echo "kube-router: building $version (cold: minutes)" >&2
  mkdir -p "$(dirname "$out")"
  (cd "$module" && CGO_ENABLED=0 go build -trimpath -o "$out.tmp" \
    -ldflags "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$version" \
    github.com/cloudnativelabs/kube-router/v2/cmd/kube-router)
  mv "$out.tmp" "$out"
fi
echo "$out"
