#!/usr/bin/env bash
# Fetch the pinned Debian trixie source of Valkey 8.1.1 and prepare a pristine
# source tree: orig tarball + Debian's patch series (security fixes), minus
#  - debian-packaging/*: flips valkey.conf defaults (daemonize yes, log paths);
#  - 0004 USE_SYSTEM_JEMALLOC: its `#if USE_SYSTEM_JEMALLOC == yes` is true when
#    neither macro is defined, which breaks linking the bundled jemalloc (we use
#    Valkey's bundled jemalloc so the image needs no libjemalloc).
#
#   images/redis-uring/fetch-source.sh [CACHE_DIR]     (default: <repo>/bin/redis-uring)
#
# Output: $CACHE/src/valkey-8.1.1/ (pristine, never modified by the build) and the
# downloaded files under $CACHE/dl/. Both tarballs are verified by sha256; the
# upstream source is never committed.
set -euo pipefail

VERSION=8.1.1+dfsg1-3+deb13u2
ORIG=valkey_8.1.1+dfsg1.orig.tar.xz
ORIG_SHA256=d9bbd82eecb82f359e649a0007ad3dc1b47cc15afa626348ca86b73c4ae2c7ee
DEBIAN=valkey_${VERSION}.debian.tar.xz
DEBIAN_SHA256=b5a16407d42c74b93cce893e9480c6c3a8d1f85e247cc2e57627d7ab7746f259

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${1:-$repo/bin/redis-uring}
dl=$cache/dl
src=$cache/src/valkey-8.1.1

verify() { # file sha256
  [[ -f $1 ]] && echo "$2  $1" | sha256sum -c --quiet - >/dev/null 2>&1
}

mkdir -p "$dl"
if ! verify "$dl/$ORIG" "$ORIG_SHA256" || ! verify "$dl/$DEBIAN" "$DEBIAN_SHA256"; then
  # The pool by sha256 first; apt's index only knows the newest security update.
  (cd "$dl" && "$repo/hack/apt-trixie.sh" pool "main/v/valkey/$ORIG" "$ORIG_SHA256" &&
    "$repo/hack/apt-trixie.sh" pool "main/v/valkey/$DEBIAN" "$DEBIAN_SHA256") ||
    (cd "$dl" && "$repo/hack/apt-trixie.sh" source --download-only "valkey=$VERSION")
  verify "$dl/$ORIG" "$ORIG_SHA256" || { echo "fetch-source: sha256 mismatch for $ORIG" >&2; exit 1; }
  verify "$dl/$DEBIAN" "$DEBIAN_SHA256" || { echo "fetch-source: sha256 mismatch for $DEBIAN" >&2; exit 1; }
fi

stamp=$src/.prepared-$ORIG_SHA256-$DEBIAN_SHA256
[[ -f $stamp ]] && exit 0
rm -rf "$src" "$cache/src/debian"
mkdir -p "$cache/src"
tar -xJf "$dl/$ORIG" -C "$cache/src"
tar -xJf "$dl/$DEBIAN" -C "$cache/src"
while read -r p; do
  [[ -z $p || $p == \#* || $p == debian-packaging/* || $p == 0004-Add-support-for-USE_SYSTEM_JEMALLOC-flag.patch ]] && continue
  patch -d "$src" -p1 -s --no-backup-if-mismatch <"$cache/src/debian/patches/$p"
done <"$cache/src/debian/patches/series"
touch "$stamp"
echo "fetch-source: $src ready"
