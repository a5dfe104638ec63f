#!/usr/bin/env bash
# make release-plugin: kubectl-uring for krew.
#
#   hack/release-plugin.sh VERSION DIST URL
#
# Cross-compiles kubectl-uring for linux/amd64 and linux/arm64 (CGO off,
# GOARCH), packs each into DIST/kubectl-uring_VERSION_linux_ARCH.tar.gz (the
# binary alone, at the archive's top, owner and times fixed so that the same
# tree gives the same bytes), writes its SHA-256 beside it (.sha256, as
# sha256sum prints it), and writes DIST/uring.yaml: plugins/uring.yaml with
# the version, URL (where the archives will be downloaded from) and each
# archive's SHA-256 in place of its {{...}} fields. It fails if the manifest
# does not name every archive it built with that archive's SHA-256, or keeps
# a field unfilled.
set -euo pipefail

version=${1:?usage: hack/release-plugin.sh VERSION DIST URL}
dist=${2:?usage: hack/release-plugin.sh VERSION DIST URL}
url=${3:?usage: hack/release-plugin.sh VERSION DIST URL}
url=${url%/}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dist"
dist=$(cd "$dist" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

manifest="# Written by make release-plugin from plugins/uring.yaml.
$(grep -v '^#' "$repo/plugins/uring.yaml")"
manifest=${manifest//'{{VERSION}}'/$version}
manifest=${manifest//'{{PLUGIN_URL}}'/$url}
archives=()
for arch in amd64 arm64; do
  mkdir -p "$work/$arch"
  (cd "$repo" && CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "-s -w" -o "$work/$arch/kubectl-uring" ./cmd/kubectl-uring)
  archive=kubectl-uring_${version}_linux_${arch}.tar.gz
  tar -C "$work/$arch" --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - kubectl-uring | gzip -n >"$dist/$archive"
  (cd "$dist" && sha256sum "$archive" >"$archive.sha256")
  sum=$(cut -d' ' -f1 "$dist/$archive.sha256")
  upper=$(tr '[:lower:]' '[:upper:]' <<<"$arch")
  manifest=${manifest//"{{SHA256_LINUX_$upper}}"/$sum}
  archives+=("$archive:$sum")
done
printf '%s\n' "$manifest" >"$dist/uring.yaml"

if grep -n '{{' "$dist/uring.yaml"; then
  echo "release-plugin: $dist/uring.yaml keeps the fields above unfilled" >&2
  exit 1
fi
for entry in "${archives[@]}"; do
  archive=${entry%%:*} sum=${entry#*:}
  if ! grep -A1 -F "uri: \"$url/$archive\"" "$dist/uring.yaml" | grep -qF "sha256: \"$sum\""; then
    echo "release-plugin: $dist/uring.yaml does not name $archive with its SHA-256 $sum" >&2
    exit 1
  fi
done
echo "release-plugin: $version: ${archives[*]%%:*} with .sha256 files and uring.yaml in $dist" >&2
