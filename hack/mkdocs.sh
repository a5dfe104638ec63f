#!/usr/bin/env bash
# Run mkdocs (with mkdocs-material) from a venv under bin/mkdocs/<hash of the lock file>/, made
# on first use from hack/mkdocs/requirements.txt (every file pinned by hash) and reused while that
# file is unchanged. Debian's python3 makes the venv; python3-venv is installed from apt when it
# is missing. Arguments go to mkdocs.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
requirements=$repo/hack/mkdocs/requirements.txt
venv=$repo/bin/mkdocs/$(sha256sum "$requirements" | cut -c1-16)
if [[ ! -f $venv/.complete ]]; then
  # Debian ships venv's pip bootstrap (ensurepip) in python3-venv, not with python3.
  if ! /usr/bin/python3 -c 'import ensurepip' 2>/dev/null; then
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends python3-venv >&2
  fi
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --require-hashes -r "$requirements" >&2
  touch "$venv/.complete"
fi
NO_MKDOCS_2_WARNING=1 exec "$venv/bin/mkdocs" "$@"
