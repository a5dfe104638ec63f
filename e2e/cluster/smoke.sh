#!/usr/bin/env bash
# Smoke check of the test bed: the things the product relies on, end to end.
#
#   e2e/cluster/smoke.sh
#
# 1. the cluster is up (cluster.sh up);
# 2. a pod whose PVC uses uring-local-ext4 gets a local PV from the provisioner, writes
#    to it, and sees ext4 (from the mount table: statfs, `stat -f -c %T`, says
#    "ext2/ext3" for ext4 too, since the three share one magic number);
# 3. io_uring (a linked write + fdatasync) works in that pod under a Localhost seccomp
#    profile = containerd's RuntimeDefault + io_uring_setup/enter/register;
# 4. under a Localhost profile that makes io_uring_setup fail with EPERM, the same
#    probe fails with EPERM (what the server's fallback path will meet);
# 5. redis_exporter, built by e2e/images, serves metrics through a Service: a client
#    pod reaches it by its cluster DNS name (CoreDNS, kube-proxy, the image pipeline).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
ns=uring-smoke
profiles=/var/lib/kubelet/seccomp/uring-e2e

eval "$("$here/cluster.sh" up)"
kubectl_bin=${KUBECTL:-$(command -v "$repo/bin/k8s/$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$repo/hack/k8s/go.mod")/kubectl" kubectl | awk 'NR == 1')}
kubectl() { "$kubectl_bin" "$@"; }
log() { echo "smoke: $*" >&2; }

for image in uring-probe redis-exporter; do
  [[ -f $repo/bin/e2e/images/$image.tar ]] || "$repo/e2e/images/build.sh" "$image"
done
exporter_image=oliver006/redis_exporter:$(awk '$1 == "require" {print $3}' "$repo/e2e/images/redis-exporter/go.mod")

install -d "$profiles"
install -m 0644 "$here/seccomp/io-uring.json" "$profiles/io-uring.json"
install -m 0644 "$here/seccomp/deny-io-uring.json" "$profiles/deny-io-uring.json"

kubectl delete namespace "$ns" --ignore-not-found --wait >/dev/null
kubectl create namespace "$ns" >/dev/null
trap 'kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true' EXIT
wait_for_sa() { kubectl -n "$ns" get serviceaccount default >/dev/null 2>&1; }
for _ in $(seq 50); do wait_for_sa && break; sleep 0.2; done

# probe_pod <name> <seccomp profile> [pvc]: a run-once pod that reports the volume's
# filesystem, writes to it and runs uring-probe there.
probe_pod() {
  local name=$1 profile=$2 claim=${3:-}
  local volume="emptyDir: {}"
  [[ -z $claim ]] || volume="persistentVolumeClaim: {claimName: $claim}"
  kubectl -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $name
spec:
  restartPolicy: Never
  securityContext:
    seccompProfile:
      type: Localhost
      localhostProfile: uring-e2e/$profile
  containers:
  - name: probe
    image: uring-probe:e2e
    command: [sh, -c, 'echo "filesystem: \$(findmnt -n -o FSTYPE /data) (statfs: \$(stat -f -c %T /data))"; echo written > /data/hello && cat /data/hello && exec uring-probe /data']
    volumeMounts:
    - {name: data, mountPath: /data}
  volumes:
  - name: data
    $volume
EOF
}

# logged <pod> <regex>: the pod's log has a matching line. grep reads the log
# from a string: as the end of a pipe under pipefail, grep -q quitting at the
# first match would fail the pipeline with kubectl's SIGPIPE.
logged() { grep -q "$2" <<<"$(kubectl -n "$ns" logs "$1")"; }

# finish <pod>: wait until it has run, print its log, return its exit code.
finish() {
  local pod=$1 phase
  for _ in $(seq 300); do
    phase=$(kubectl -n "$ns" get pod "$pod" -o 'jsonpath={.status.phase}')
    [[ $phase == Succeeded || $phase == Failed ]] && break
    sleep 0.2
  done
  kubectl -n "$ns" logs "$pod" | sed "s/^/  $pod| /" >&2
  echo "  $pod| phase $phase $(kubectl -n "$ns" get pod "$pod" -o 'jsonpath={.status.containerStatuses[0].state}')" >&2
  [[ $phase == Succeeded ]]
}

start=$SECONDS
kubectl -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
spec:
  storageClassName: uring-local-ext4
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
EOF
probe_pod uring-allowed io-uring.json data
probe_pod uring-denied deny-io-uring.json
kubectl -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: exporter
  labels: {app: exporter}
spec:
  containers:
  - name: exporter
    image: $exporter_image
    args: [--redis.addr=redis://localhost:6379]
    ports: [{name: metrics, containerPort: 9121}]
    readinessProbe:
      httpGet: {path: /health, port: metrics}
      periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata:
  name: exporter
spec:
  selector: {app: exporter}
  ports: [{name: metrics, port: 9121, targetPort: metrics}]
EOF

failed=
if finish uring-allowed && logged uring-allowed '^filesystem: ext4 ' && logged uring-allowed '^io_uring: write+fdatasync ok'; then
  log "PASS ext4 local PV ($(kubectl -n "$ns" get pvc data -o 'jsonpath={.spec.volumeName}')) and io_uring under the Localhost profile"
else
  log "FAIL ext4 volume or io_uring under the Localhost profile"
  failed=1
fi
if ! finish uring-denied && logged uring-denied '^io_uring_setup: EPERM'; then
  log "PASS io_uring_setup is EPERM under the denying profile"
else
  log "FAIL io_uring_setup was not refused with EPERM under the denying profile"
  failed=1
fi
kubectl -n "$ns" wait --for=condition=Ready pod/exporter --timeout=60s >/dev/null
kubectl -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: metrics-client
spec:
  restartPolicy: Never
  containers:
  - name: client
    image: uring-probe:e2e
    # kube-proxy may need a moment after the endpoint turns ready: retry briefly.
    command: [bash, -c, 'for i in {1..30}; do exec 3<>/dev/tcp/exporter/9121 && break; sleep 0.5; done; printf "GET /metrics HTTP/1.0\\r\\nHost: exporter\\r\\n\\r\\n" >&3 && grep -m1 "^redis_exporter_build_info" <&3']
EOF
if finish metrics-client && logged metrics-client 'redis_exporter_build_info'; then
  log "PASS $exporter_image serves metrics at exporter.$ns.svc (DNS + Service)"
else
  log "FAIL no metrics from $exporter_image through its Service"
  failed=1
fi
log "checks took $((SECONDS - start))s"
[[ -z $failed ]]
