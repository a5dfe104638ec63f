#!/usr/bin/env bash
# Build SeaweedFS's weed at the commit pinned in e2e/images/seaweedfs/go.mod into
# bin/seaweedfs/<version>/ for the tests that need a real S3 endpoint
# (internal/testenv.StartObjectStore) and for the e2e suite's SeaweedFS image
# (e2e/images/seaweedfs), stripped as an image's binary is. Prints its path.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
module=$repo/e2e/images/seaweedfs
version=$(awk '$1 == "require" && $2 == "github.com/seaweedfs/seaweedfs" {print $3}' "$module/go.mod")
out=$repo/bin/seaweedfs/$version/weed
if [[ ! -x $out ]]; then
  mkdir -p "$(dirname "$out")"
  (cd "$module" && CGO_ENABLED=0 go build -trimpath -o "$out.tmp" \
    -ldflags "-s -w -X github.com/seaweedfs/seaweedfs/weed/util/version.COMMIT=${version##*-}" \
    github.com/seaweedfs/seaweedfs/weed)
  mv "$out.tmp" "$out"
fi
echo "$out"
