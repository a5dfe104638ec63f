#!/usr/bin/env bash
# go-install-tool.sh TARGET PACKAGE VERSION: install a pinned Go tool as ./bin/<name>-<version>
# and point ./bin/<name> at it, so several versions can coexist and upgrades are explicit.
set -euo pipefail
target=$1 package=$2 version=$3
dir=$(dirname "$target")
name=$(basename "${package%/v[0-9]*}")
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "installing $package@$version" >&2
GOBIN=$tmp go install "$package@$version"
mv "$tmp/$name" "$target"
ln -sf "$(basename "$target")" "$dir/$name"
