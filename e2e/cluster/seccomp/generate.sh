#!/usr/bin/env bash
# Regenerate the smoke check's Localhost seccomp profiles from a running test bed.
#
#   e2e/cluster/seccomp/generate.sh      # needs `cluster.sh up` and the uring-probe image
#
# RuntimeDefault is whatever the node's containerd applies to a container with the
# default capabilities; this reads it back from such a container's OCI spec, so the
# profiles are "RuntimeDefault + io_uring" exactly, not a hand-copied approximation.
#   io-uring.json       RuntimeDefault with io_uring_setup/enter/register allowed
#   deny-io-uring.json  RuntimeDefault with the three failing with EPERM
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
export KUBECONFIG=${KUBECONFIG:-$here/../../../bin/e2e/kubeconfig}
uring='["io_uring_setup", "io_uring_enter", "io_uring_register"]'
pod=seccomp-runtime-default

kubectl delete pod "$pod" --ignore-not-found --wait >/dev/null
kubectl run "$pod" --image=uring-probe:e2e --restart=Never --command \
  --overrides='{"spec":{"securityContext":{"seccompProfile":{"type":"RuntimeDefault"}}}}' -- sleep 600 >/dev/null
trap 'kubectl delete pod "$pod" --wait=false >/dev/null' EXIT
kubectl wait --for=condition=Ready "pod/$pod" --timeout=60s >/dev/null
id=$(kubectl get pod "$pod" -o 'jsonpath={.status.containerStatuses[0].containerID}')
runtime_default=$(ctr --address /run/uring-e2e/containerd/containerd.sock -n k8s.io containers info "${id#containerd://}" |
  jq '.Spec.linux.seccomp')

# Allowed: io_uring joins the first unconditional allow rule (if not already there).
jq --argjson uring "$uring" '
  (first(.syscalls | to_entries[] | select(.value.action == "SCMP_ACT_ALLOW" and .value.args == null)) | .key) as $i
  | .syscalls[$i].names = (.syscalls[$i].names + $uring | unique)' <<<"$runtime_default" >"$here/io-uring.json"
# Denied: out of every allow rule, then an explicit EPERM (1) rule.
jq --argjson uring "$uring" '
  .syscalls |= map(.names -= $uring | select(.names | length > 0))
  | .syscalls += [{"names": $uring, "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]' <<<"$runtime_default" >"$here/deny-io-uring.json"
echo "wrote $here/io-uring.json $here/deny-io-uring.json"
