#!/usr/bin/env bash
# Run apt-get against Debian trixie without touching the host's apt sources.
#
# The host is bookworm; a few pinned inputs (etcd 3.5, the Valkey 8.1.1 source
# package) only exist in trixie. Adding trixie to /etc/apt would let a later
# `apt-get upgrade` drag the host forward, so this keeps a private apt state
# under ${APT_TRIXIE_DIR} and is used only for `download` and `source`.
#
#   hack/apt-trixie.sh download etcd-server
#   hack/apt-trixie.sh source --download-only valkey=8.1.1+dfsg1-3+deb13u2
#   hack/apt-trixie.sh pool main/v/valkey/valkey_8.1.1+dfsg1.orig.tar.xz SHA256
#
# `pool` fetches one file of a pinned version straight from the archive's pool
# (the main archive, then the security archive) into the current directory and
# checks its sha256. The pinned inputs use it first: a security update replaces
# the version in trixie's index the day it is published, and `apt-get source
# pkg=old` then fails although the old files stay in the pool.
set -euo pipefail

root=${APT_TRIXIE_DIR:-$(cd "$(dirname "$0")/.." && pwd)/bin/apt-trixie}
# Use the Debian mirrors the host is already configured with.
host_uris=$(grep -hs -e '^URIs:' -e '^deb ' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list |
  grep -o 'https\?://[^ ]*' || true)
mirror=${DEBIAN_MIRROR:-$(grep -m1 '/debian/\?$' <<<"$host_uris" || true)}
security=${DEBIAN_SECURITY_MIRROR:-$(grep -m1 '/debian-security/\?$' <<<"$host_uris" || true)}
[[ -n $mirror ]] || { echo "apt-trixie: no Debian mirror in /etc/apt; set DEBIAN_MIRROR" >&2; exit 1; }
if [[ ${1:-} == pool ]]; then
  path=$2 sum=$3 file=${2##*/}
  command -v curl >/dev/null || { echo "apt-trixie: pool needs curl (apt-get install curl)" >&2; exit 1; }
  for base in "$mirror/pool" ${security:+"$security/pool/updates"}; do
    # The pool's file names carry '+' (Debian versions); the archive wants it escaped.
    if curl -fsS --retry 2 -o "$file.part" "${base%/}/${path//+/%2b}" 2>/dev/null &&
      echo "$sum  $file.part" | sha256sum -c --quiet - >/dev/null 2>&1; then
      mv "$file.part" "$file"
      exit 0
    fi
  done
  rm -f "$file.part"
  echo "apt-trixie: pool/$path with sha256 $sum is not in the archive" >&2
  exit 1
fi

mkdir -p "$root"/{lists/partial,cache/archives/partial,etc/preferences.d}
cat >"$root/etc/sources.list" <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main
SRC
if [[ -n $security ]]; then
  cat >>"$root/etc/sources.list" <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $security trixie-security main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $security trixie-security main
SRC
fi

opts=(
  -o "Dir::Etc::SourceList=$root/etc/sources.list"
  -o "Dir::Etc::SourceParts=-"
  -o "Dir::Etc::PreferencesParts=$root/etc/preferences.d"
  -o "Dir::State::Lists=$root/lists"
  -o "Dir::Cache=$root/cache"
  -o "Dir::State::status=/dev/null"
  -o "APT::Sandbox::User=root"
)

# Refresh the private index at most once a day.
stamp="$root/lists/.updated"
if [[ ! -f $stamp || -n $(find "$stamp" -mmin +1440) ]]; then
  apt-get "${opts[@]}" -qq update
  touch "$stamp"
fi
exec apt-get "${opts[@]}" "$@"
