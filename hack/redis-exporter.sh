#!/usr/bin/env bash
# Build redis_exporter at the version pinned in e2e/images/redis-exporter/go.mod
# (the sidecar image's) into bin/redis-exporter/<version>/ for tests. Prints the
# binary's path.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
module=$repo/e2e/images/redis-exporter
version=$(awk '$1 == "require" && $2 == "github.com/oliver006/redis_exporter" {print $3}' "$module/go.mod")
out=$repo/bin/redis-exporter/$version/redis_exporter
if [[ ! -x $out ]]; then
  (cd "$module" && CGO_ENABLED=0 go build -trimpath -o "$out.tmp" \
    -ldflags "-X main.BuildVersion=$version" github.com/oliver006/redis_exporter)
  mv "$out.tmp" "$out"
fi
echo "$out"
