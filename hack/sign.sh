#!/usr/bin/env bash
# make release's signatures and SBOMs: sign what a release pushed, by digest.
#
#   hack/sign.sh DIST IMAGE@sha256:<digest>... [-- ARTIFACT@sha256:<digest>...]
#
# Each IMAGE gets a cosign signature and a signed SBOM attestation: syft's scan of
# the pushed image as an SPDX 2.3 JSON document, attached with `cosign attest --type
# spdxjson` and kept as DIST/sbom/<name>.spdx.json. An IMAGE that is an OCI index
# (a multi-arch release) is signed with each platform's image, and each platform's
# image gets its own SBOM, DIST/sbom/<name>-<os>-<arch>.spdx.json (crane reads the
# index: CRANE). Each ARTIFACT after -- (the
# chart's OCI artifact) gets a signature only. DIST/cosign.pub is the public key a
# user verifies with; DIST/artifacts.txt lists every reference signed, one a line.
#
# The key is the release's: COSIGN_KEY (a cosign private key file, or a key URI
# cosign takes, such as env://VAR or a KMS) and COSIGN_PASSWORD (empty for a key
# without one). Without COSIGN_KEY, for a release to a test registry (make e2e), a
# throwaway key pair made once on this machine under bin/release-key/ (never
# committed) signs, and the log says so.
#
# No transparency log (Rekor) or Fulcio is reachable here: signatures are made with
# the key and not uploaded to a log (--tlog-upload=false), so a verifier passes
# --insecure-ignore-tlog; docs/releases.md says what that gives up. Tools: COSIGN and
# SYFT (the Makefile's pinned builds). A registry on localhost or 127.0.0.1 is
# spoken to over plain HTTP, as hack/release.sh does.
set -euo pipefail

usage="usage: hack/sign.sh DIST IMAGE@sha256:<digest>... [-- ARTIFACT@sha256:<digest>...]"
dist=${1:?$usage}
shift
repo=$(cd "$(dirname "$0")/.." && pwd)
cosign=${COSIGN:?COSIGN names the cosign binary (make release passes it)}
syft=${SYFT:?SYFT names the syft binary (make release passes it)}
crane=${CRANE:?CRANE names the crane binary (make release passes it)}
log() { echo "sign: $*" >&2; }
# cosign warns on every call that nothing goes to a transparency log, syft draws
# its progress: print what they say only when they fail.
quiet() {
  local out
  out=$("$@" 2>&1) || { echo "$out" >&2; log "failed: $*"; return 1; }
}

images=() artifacts=()
while (($#)); do
  [[ $1 != -- ]] || { shift && artifacts=("$@") && break; }
  images+=("$1")
  shift
done
((${#images[@]} + ${#artifacts[@]})) || { log "$usage"; exit 2; }
for ref in "${images[@]}" "${artifacts[@]}"; do
  [[ $ref =~ ^[^@]+@sha256:[0-9a-f]{64}$ ]] || { log "$ref is not a reference by digest (name@sha256:...)"; exit 2; }
done

if [[ -z ${COSIGN_KEY:-} ]]; then
  key_dir=$repo/bin/release-key
  if [[ ! -f $key_dir/cosign.key ]]; then
    tmp=$(mktemp -d)
    COSIGN_PASSWORD='' quiet "$cosign" generate-key-pair --output-key-prefix "$tmp/cosign"
    mkdir -p "$key_dir"
    mv "$tmp/cosign.pub" "$tmp/cosign.key" "$key_dir/"
    rmdir "$tmp"
  fi
  export COSIGN_KEY=$key_dir/cosign.key COSIGN_PASSWORD=''
  log "COSIGN_KEY is unset: signing with the throwaway key pair $key_dir/cosign.key, made on this machine and never committed; good for a test registry only (a release users install sets COSIGN_KEY and COSIGN_PASSWORD)"
elif [[ -z ${COSIGN_PASSWORD+set} ]]; then
  log "COSIGN_KEY is set but COSIGN_PASSWORD is not: set it (empty for a key without a password); cosign would ask on a terminal"
  exit 2
fi

# Everything a release is pushed to goes to one registry.
plain_http=() crane_insecure=()
host=${images[0]:-${artifacts[0]}}
host=${host%%/*}
if [[ $host == localhost:* || $host == 127.0.0.1:* ]]; then
  plain_http=(--allow-http-registry)
  crane_insecure=(--insecure)
  export SYFT_REGISTRY_INSECURE_USE_HTTP=true
fi
# Nothing to ask the internet: syft's update check is off, and nothing goes to Rekor.
export SYFT_CHECK_FOR_APP_UPDATE=false
# --recursive: an image that is an OCI index gets its platforms' images signed too.
sign=("$cosign" sign --key "$COSIGN_KEY" --tlog-upload=false --yes --recursive "${plain_http[@]}")
attest=("$cosign" attest --key "$COSIGN_KEY" --tlog-upload=false --yes "${plain_http[@]}" --type spdxjson)

mkdir -p "$dist/sbom"
"$cosign" public-key --key "$COSIGN_KEY" >"$dist/cosign.pub"
: >"$dist/artifacts.txt"
# attest_sbom REF FILE: syft's SPDX document of the image REF into FILE, attested on REF.
attest_sbom() {
  quiet "$syft" scan "registry:$1" --source-name "${1%@*}" --output "spdx-json=$2"
  quiet "${attest[@]}" --predicate "$2" "$1"
}
for ref in "${images[@]}"; do
  name=${ref%@*}
  name=${name##*/}
  name=${name%%:*}
  quiet "${sign[@]}" "$ref"
  # The reference as pulled: an index gets the SBOM of the image syft picks for
  # this machine's platform.
  attest_sbom "$ref" "$dist/sbom/$name.spdx.json"
  echo "$ref" >>"$dist/artifacts.txt"
  # Each platform's image of an index (what a node pulls, by its own digest)
  # gets its own SBOM: the arm64 image's packages are not the amd64 one's.
  platforms=$("$crane" manifest "${crane_insecure[@]}" "$ref" |
    jq -r 'select(.manifests) | .manifests[] | select(.platform.os != "unknown") | "\(.digest) \(.platform.os)-\(.platform.architecture)"')
  while read -r platform_digest platform; do
    [[ -n $platform_digest ]] || continue
    platform_ref=${ref%@*}@$platform_digest
    attest_sbom "$platform_ref" "$dist/sbom/$name-$platform.spdx.json"
    echo "$platform_ref" >>"$dist/artifacts.txt"
  done <<<"$platforms"
  log "$ref signed, its SBOM attested${platforms:+, and each platform image its own}"
done
for ref in "${artifacts[@]}"; do
  quiet "${sign[@]}" "$ref"
  echo "$ref" >>"$dist/artifacts.txt"
  log "$ref signed"
done
