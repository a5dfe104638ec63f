#!/usr/bin/env bash
# go-install-tool.sh TARGET PACKAGE VERSION [LDFLAGS]: install a pinned Go tool as ./bin/<name>-<version>
# and point ./bin/<name> at it, so several versions can coexist and upgrades are explicit.
# LDFLAGS stamp what a tool's own release build would (its version, when it does not
# read it from the module).
set -euo pipefail
target=$1 package=$2 version=$3 ldflags=${4:-}
dir=$(dirname "$target")
name=$(basename "${package%/v[0-9]*}")
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "installing $package@$version" >&2
GOBIN=$tmp go install -ldflags "$ldflags" "$package@$version"
mv "$tmp/$name" "$target"
ln -sf "$(basename "$target")" "$dir/$name"
