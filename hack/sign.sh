#!/usr/bin/env bash
# make release's signatures and SBOMs: sign what a release pushed, by digest.
#
#   hack/sign.sh DIST IMAGE@sha256:<digest>... [-- ARTIFACT@sha256:<digest>...]
#
# Each IMAGE gets a cosign signature and a signed SBOM attestation: syft's scan of
# the pushed image as an SPDX 2.3 JSON document, attached with `cosign attest --type
# spdxjson` and kept as DIST/sbom/<name>.spdx.json. Each ARTIFACT after -- (the
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
plain_http=()
host=${images[0]:-${artifacts[0]}}
host=${host%%/*}
if [[ $host == localhost:* || $host == 127.0.0.1:* ]]; then
  plain_http=(--allow-http-registry)
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
for ref in "${images[@]}"; do
  name=${ref%@*}
  name=${name##*/}
  name=${name%%:*}
  sbom=$dist/sbom/$name.spdx.json
  quiet "$syft" scan "registry:$ref" --source-name "${ref%@*}" --output "spdx-json=$sbom"
  quiet "${sign[@]}" "$ref"
  quiet "${attest[@]}" --predicate "$sbom" "$ref"
  echo "$ref" >>"$dist/artifacts.txt"
  log "$ref signed, its SBOM attested"
done
for ref in "${artifacts[@]}"; do
  quiet "${sign[@]}" "$ref"
  echo "$ref" >>"$dist/artifacts.txt"
  log "$ref signed"
done
