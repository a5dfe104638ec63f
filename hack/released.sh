#!/usr/bin/env bash
# Release an earlier version of this project from its own commit, for the e2e
# upgrade test (make e2e-upgrade): what its users run today, built the way
# that version built itself.
#
#   hack/released.sh COMMIT VERSION REGISTRY DIST [FIX...]
#
# COMMIT's tree goes into a detached git worktree under bin/e2e/released/, the FIX
# commits are cherry-picked onto it, and that tree's own `make release` pushes
# its images and chart to REGISTRY as VERSION and writes DIST. FIXes are for
# building only, never for what the release does: a pinned input that can no
# longer be fetched the old way (a Debian security update replaced the Valkey
# source package in the index; the fix fetches it from the pool by sha256).
# Helm and kustomize are this tree's ($HELM, $KUSTOMIZE); the Go caches and the
# private dockerd of e2e/images/build.sh, with its base images, are shared when
# it runs (E2E_KEEP_BUILDER=1 on the build before this one).
set -euo pipefail

commit=${1:?usage: hack/released.sh COMMIT VERSION REGISTRY DIST [FIX...]}
version=${2:?usage: hack/released.sh COMMIT VERSION REGISTRY DIST [FIX...]}
registry=${3:?usage: hack/released.sh COMMIT VERSION REGISTRY DIST [FIX...]}
dist=$(realpath -m "${4:?usage: hack/released.sh COMMIT VERSION REGISTRY DIST [FIX...]}")
shift 4
repo=$(cd "$(dirname "$0")/.." && pwd)
tree=$repo/bin/e2e/released/$commit
log() { echo "released: $*" >&2; }

git -C "$repo" cat-file -e "$commit^{commit}" ||
  { log "commit $commit is not in this clone (a shallow clone? fetch it)"; exit 2; }
if [[ ! -d $tree ]]; then
  git -C "$repo" worktree prune
  git -C "$repo" worktree add --detach "$tree" "$commit" >/dev/null
  for fix in "$@"; do
    git -C "$tree" -c user.name=released -c user.email=released@uring-redis cherry-pick -x "$fix" >/dev/null
  done
  log "$commit with fixes ${*:-(none)} in $tree"
fi

start=$SECONDS
make -C "$tree" --no-print-directory release VERSION="$version" REGISTRY="$registry" DIST="$dist" \
  HELM="${HELM:?HELM names the helm of this tree}" KUSTOMIZE="${KUSTOMIZE:?KUSTOMIZE names the kustomize of this tree}"
log "$version from $commit released to $registry in $((SECONDS - start)) s"
