#!/usr/bin/env bash
# Turn a pristine Valkey tree into our build tree, incrementally:
#
#   prepare-tree.sh PRISTINE BUILD
#
# BUILD starts as a copy of PRISTINE. Our patches/*.patch are applied in order
# with `patch -p1` and src/aof_uring.{c,h} are copied in. When the patch series
# changes, only the files the previous series touched are restored from
# PRISTINE before re-applying, so objects of untouched files (and the bundled
# jemalloc/lua builds) survive and `make build` stays incremental. Files are
# copied without preserving mtimes so make rebuilds whatever changed.
# Used by the Makefile and by the Dockerfile, so both build the same way.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
pristine=$1
build=$2
shopt -s nullglob
patches=("$here"/patches/*.patch)

if [[ ! -d $build/src ]]; then
  mkdir -p "$(dirname "$build")"
  rm -rf "$build.tmp"
  cp -a "$pristine" "$build.tmp"
  rm -f "$build.tmp"/.prepared-*
  mv "$build.tmp" "$build"
fi

sum=$( { printf '%s\n' "${patches[@]##*/}"; cat "${patches[@]}" /dev/null; } | sha256sum | cut -d' ' -f1)
if [[ $(cat "$build/.series-sha256" 2>/dev/null) != "$sum" ]]; then
  # Restore every file the old or the new series touches; record the union
  # first so an interrupted run is undone completely by the next one.
  new_files=$(sed -n 's#^+++ b/\([^[:space:]]*\).*#\1#p' "${patches[@]}" /dev/null | sort -u)
  { cat "$build/.series-files" 2>/dev/null || true; echo "$new_files"; } | sed '/^$/d' | sort -u >"$build/.series-files.tmp"
  mv "$build/.series-files.tmp" "$build/.series-files"
  rm -f "$build/.series-sha256"
  while read -r f; do
    if [[ -f $pristine/$f ]]; then cp "$pristine/$f" "$build/$f"; else rm -f "$build/$f"; fi
  done <"$build/.series-files"
  for p in "${patches[@]}"; do
    echo "prepare-tree: applying ${p##*/}"
    patch -d "$build" -p1 -s --no-backup-if-mismatch <"$p"
  done
  echo "$new_files" | sed '/^$/d' >"$build/.series-files"
  echo "$sum" >"$build/.series-sha256"
fi

for f in "$here"/src/*.c "$here"/src/*.h; do
  cmp -s "$f" "$build/src/${f##*/}" || cp "$f" "$build/src/${f##*/}"
done
