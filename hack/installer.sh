#!/usr/bin/env bash
# Write install.yaml (CRDs, RBAC, operator: the config/default overlay) for
# `kubectl apply -f`, with the given image references (tags or digests):
#
#   hack/installer.sh OUT OPERATOR_IMAGE REDIS_IMAGE BENCH_IMAGE EXPORTER_IMAGE
#
# The operator has no default server or benchmark image: they are flags here as
# in the chart, with the chart's default pull policy, so that both build the same
# pods. KUSTOMIZE names the kustomize binary.
set -euo pipefail
out=${1:?usage: hack/installer.sh OUT OPERATOR_IMAGE REDIS_IMAGE BENCH_IMAGE EXPORTER_IMAGE}
operator=${2:?} redis=${3:?} bench=${4:?} exporter=${5:?}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# repository[:tag][@digest]: a colon after the last slash starts the tag.
name=${operator%@*}
[[ ${name##*/} != *:* ]] || name=${name%:*}
cat >"$work/kustomization.yaml" <<YAML
resources:
- $(realpath --relative-to="$work" "$repo/config/default")
images:
- name: uring-redis-operator
  newName: $name
$([[ $operator == *@* ]] && echo "  digest: ${operator#*@}" || echo "  newTag: ${operator##*:}")
patches:
- target: {kind: Deployment, name: controller-manager}
  patch: |-
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--redis-image=$redis"}
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--bench-image=$bench"}
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--backup-image=$operator"}
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--exporter-image=$exporter"}
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--image-pull-policy=IfNotPresent"}
YAML
mkdir -p "$(dirname "$out")"
"${KUSTOMIZE:?KUSTOMIZE names the kustomize binary}" build --load-restrictor LoadRestrictionsNone "$work" >"$out.tmp"
mv "$out.tmp" "$out"
