#!/usr/bin/env bash
# Install shellcheck from Debian's archive at the version pinned below
# (idempotent; bookworm's), then run it on the given files. Debian's package
# rather than `go install`: shellcheck is Haskell.
set -euo pipefail

version=0.9.0-1

installed=$(dpkg-query -W -f='${Status} ${Version}\n' shellcheck 2>/dev/null || true)
if [[ $installed != "install ok installed $version" ]]; then
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  # Other builds may hold the dpkg lock; wait for it instead of failing.
  "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600 -q install -y --no-install-recommends "shellcheck=$version" >&2
fi
exec shellcheck "$@"
