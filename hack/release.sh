#!/usr/bin/env bash
# make release: one version of everything, in a registry.
#
#   hack/release.sh VERSION REGISTRY [DIST]
#
# Builds every image from its Dockerfile (e2e/images/build.sh: the operator, the
# server, the benchmark runner, and redis_exporter at the version the chart pins),
# pushes them to REGISTRY (host[:port][/path]) as
#
#   REGISTRY/uring-redis-operator:VERSION
#   REGISTRY/redis-uring:<Valkey version>-uringVERSION
#   REGISTRY/uring-redis-bench:VERSION
#   REGISTRY/oliver006/redis_exporter:<pinned version>
#
# each one OCI index of its images for PLATFORMS (default linux/amd64 linux/arm64;
# pushed as <tag>-amd64 and <tag>-arm64, gathered by CRANE), so that one digest
# serves a node of either architecture,
# then packages the chart as VERSION with REGISTRY and each pushed digest as its
# defaults, and pushes it to oci://REGISTRY/charts. hack/sign.sh signs the four
# images and the chart by digest with cosign and attaches a signed SPDX SBOM to
# each image (the key: COSIGN_KEY and COSIGN_PASSWORD, else a throwaway key pair
# under bin/). DIST (default dist/) gets the chart archive, install.yaml (the same
# images by digest), cosign.pub, artifacts.txt (what was signed), sbom/ and
# SHA256SUMS of them all.
# A registry on localhost is spoken to over plain HTTP (Docker and Helm do so
# for localhost; the e2e node's containerd is configured to).
set -euo pipefail

version=${1:?usage: hack/release.sh VERSION REGISTRY [DIST]}
registry=${2:?usage: hack/release.sh VERSION REGISTRY [DIST]}
registry=${registry%/}
repo=$(cd "$(dirname "$0")/.." && pwd)
dist=$(realpath -m "${3:-$repo/dist}")
chart_dir=$repo/charts/uring-redis-operator
helm=${HELM:-$repo/bin/helm}
log() { echo "release: $*" >&2; }

[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
  { log "VERSION $version is not a semantic version x.y.z[-pre]"; exit 2; }
valkey=$(awk -F'"' '$1 ~ /uringredis.io\/valkey-version/ {print $2}' "$chart_dir/Chart.yaml")
exporter_version=$(awk '$1 == "require" {print $3}' "$repo/e2e/images/redis-exporter/go.mod")
plain_http=()
[[ ${registry%%/*} != localhost:* && ${registry%%/*} != 127.0.0.1:* ]] || plain_http=(--plain-http)

export PLATFORMS=${PLATFORMS:-linux/amd64 linux/arm64}
export IMG=$registry/uring-redis-operator:$version
export REDIS_IMG=$registry/redis-uring:$valkey-uring$version
export BENCH_IMG=$registry/uring-redis-bench:$version
export EXPORTER_IMG=$registry/oliver006/redis_exporter:$exporter_version

start=$SECONDS
digests=$(mktemp -d)
work=$(mktemp -d)
trap 'rm -rf "$digests" "$work"' EXIT
"$repo/e2e/images/build.sh" --push "$digests" redis-uring uring-redis-operator uring-redis-bench redis-exporter
digest() { cat "$digests/$1.digest"; }
# The arm64 server just pushed, run under qemu-user before a chart names it (make smoke-arm64).
[[ " $PLATFORMS " != *" linux/arm64 "* ]] || "$repo/e2e/images/smoke-arm64.sh"

# The chart, its defaults pointing at what was just pushed.
cp -a "$chart_dir" "$work/chart"
awk -v registry="$registry" -v operator="$(digest uring-redis-operator)" -v redis="$(digest redis-uring)" \
  -v bench="$(digest uring-redis-bench)" -v exporter="$(digest redis-exporter)" '
  /^[A-Za-z]/ { section = $1 }
  section == "global:" && /^  imageRegistry: ""$/ { $0 = "  imageRegistry: " registry }
  /^  digest: ""$/ {
    if (section == "image:") $0 = "  digest: " operator
    else if (section == "redisImage:") $0 = "  digest: " redis
    else if (section == "benchImage:") $0 = "  digest: " bench
    else if (section == "exporterImage:") $0 = "  digest: " exporter
  }
  { print }' "$chart_dir/values.yaml" >"$work/chart/values.yaml"
[[ $(grep -c 'digest: sha256:' "$work/chart/values.yaml") == 4 ]] ||
  { log "could not set the four digests in the chart's values.yaml"; exit 1; }
mkdir -p "$dist"
"$helm" package "$work/chart" --version "$version" --app-version "$version" --destination "$dist" >/dev/null
archive=$dist/uring-redis-operator-$version.tgz
"$helm" push "$archive" "oci://$registry/charts" "${plain_http[@]}" 2>&1 | tee "$work/chart.push"
chart_digest=$(awk '$1 == "Digest:" {print $2}' "$work/chart.push")
[[ $chart_digest =~ ^sha256:[0-9a-f]{64}$ ]] || { log "no digest in helm push's output"; exit 1; }

"$repo/hack/sign.sh" "$dist" "$IMG@$(digest uring-redis-operator)" "$REDIS_IMG@$(digest redis-uring)" \
  "$BENCH_IMG@$(digest uring-redis-bench)" "$EXPORTER_IMG@$(digest redis-exporter)" \
  -- "$registry/charts/uring-redis-operator@$chart_digest"

# install.yaml: the same images, by digest.
"$repo/hack/installer.sh" "$dist/install.yaml" "$IMG@$(digest uring-redis-operator)" "$REDIS_IMG@$(digest redis-uring)" \
  "$BENCH_IMG@$(digest uring-redis-bench)" "$EXPORTER_IMG@$(digest redis-exporter)"

(cd "$dist" && sha256sum "${archive##*/}" install.yaml cosign.pub artifacts.txt sbom/*.spdx.json >SHA256SUMS)
log "$version in $((SECONDS - start))s: signed images and oci://$registry/charts/uring-redis-operator:$version; $dist has the chart, install.yaml, cosign.pub, artifacts.txt, the SBOMs and SHA256SUMS"
