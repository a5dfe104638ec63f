#!/usr/bin/env bash
# A one-node Kubernetes for the e2e suite, offline, as host processes.
#
#   e2e/cluster/cluster.sh up        # build/fetch what is missing, boot, wait for Ready
#   e2e/cluster/cluster.sh status    # what runs, the kubeconfig path
#   e2e/cluster/cluster.sh down      # stop it and remove everything it made
#
# Control plane and node are built from source (hack/k8s-binaries.sh, CoreDNS from its
# Go module) and cached by version under bin/; containerd, runc, CNI plugins and
# iptables come from Debian (host-deps.sh). The whole cluster lives on the cni0
# bridge it creates: node IP, API server and DNS are 10.244.0.1, so none of the host's
# own interfaces or addresses is used.
#
# NetworkPolicies are enforced, as a user's network plugin would: kube-router
# (hack/kube-router.sh, built from its Go module) runs on the node as its firewall
# only (iptables and ipsets on the host, KUBE-ROUTER-* chains); the bridge stays
# the pod network and kube-proxy the Services.
#
# Storage is the product's production path: the StorageClass uring-local-ext4
# (no-provisioner, WaitForFirstConsumer) is served by sig-storage-local-static-provisioner
# running as a DaemonSet, which turns ext4 filesystems on loop devices, mounted under
# the discovery directory, into local PVs.
#
# The VM has no CAP_SYS_RESOURCE: nothing may lower oom_score_adj, hence the zeros
# passed to containerd, kubelet and kube-proxy below.
#
# Images come the way a user's cluster gets them: from a registry. The node runs
# Debian's docker-registry (the distribution registry) on localhost, storage under
# the state directory, and containerd pulls from it over plain HTTP (hosts.toml);
# `make e2e-images` pushes there. Only the sandbox image and the test bed's own
# images (provisioner, probe) are imported: see import_images.
#
# Environment: E2E_DISKS (default 10) and E2E_DISK_SIZE (default 2G) size the local
# volumes; E2E_STORAGE=chart leaves serving them to the chart's localNvme preset;
# E2E_SLOW_DISKS (default 0) adds that many volumes of the emulated gp3-like class
# (make_slow_disks); KUBECTL picks the kubectl binary.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
k8s_version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$repo/hack/k8s/go.mod")
coredns_version=v1.11.3
pause_image=registry.k8s.io/pause:3.10

bins=$repo/bin/k8s/$k8s_version # kube-* and etcd, shared with envtest
cache=$repo/bin/e2e             # CoreDNS, pause image, logs, PKI, kubeconfig
kubeconfig=$cache/kubeconfig
pki=$cache/pki
logs=$cache/logs
state=/var/lib/uring-e2e      # etcd, containerd, CNI config, volume images
run=/run/uring-e2e            # sockets, pids, pod network namespaces
kubelet_root=/var/lib/kubelet # the default, so seccomp profiles land where a chart puts them
disks=/mnt/uring-e2e/local-ext4 # the provisioner's discovery directory
slow_disks=/mnt/uring-e2e/gp3-like # make_slow_disks' ext4 mounts
slow_class=uring-gp3-like
containerd_sock=$run/containerd/containerd.sock
registry=localhost:${E2E_REGISTRY_PORT:-5000} # what e2e-images pushes to and the node pulls from

node=uring-e2e
node_ip=10.244.0.1
pod_cidr=10.244.0.0/24
service_cidr=10.96.0.0/16
api_server=https://$node_ip:6443
storage_class=uring-local-ext4
router_health_port=20244
components=(registry etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy coredns kube-router)

# The first kubectl found, read with awk: under pipefail, `head -1` quitting
# before `command -v` wrote its second line failed the script with SIGPIPE (141).
kubectl_bin=${KUBECTL:-$(command -v "$bins/kubectl" kubectl | awk 'NR == 1')}
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" "$@"; }
log() { echo "cluster: $*" >&2; }

# ---- binaries and images ---------------------------------------------------------------

ensure_binaries() {
  "$here/host-deps.sh" >&2
  "$repo/hack/k8s-binaries.sh" etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy >/dev/null
  kube_router=$("$repo/hack/kube-router.sh")
  mkdir -p "$cache/bin"
  if [[ ! -x $cache/bin/coredns-$coredns_version ]]; then
    log "building CoreDNS $coredns_version (cold: minutes)"
    local gobin
    gobin=$(mktemp -d)
    CGO_ENABLED=0 GOBIN=$gobin go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$coredns_version"
    mv "$gobin/coredns" "$cache/bin/coredns-$coredns_version"
    rm -rf "$gobin"
  fi
}

# registry.k8s.io/pause:3.10 as an OCI archive: one static binary, written by hand so
# the node boots without any image builder.
ensure_pause_image() {
  local archive=$cache/pause.tar
  [[ $archive -nt $here/pause.c ]] && return
  local dir
  dir=$(mktemp -d)
  mkdir -p "$dir/rootfs" "$dir/oci/blobs/sha256"
  gcc -static -O2 -s -o "$dir/rootfs/pause" "$here/pause.c"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$dir/rootfs" -cf "$dir/layer.tar" pause
  blob() { # file -> "digest size", stored in the layout
    local sum size
    sum=$(sha256sum "$1" | cut -d' ' -f1)
    size=$(stat -c %s "$1")
    cp "$1" "$dir/oci/blobs/sha256/$sum"
    echo "sha256:$sum $size"
  }
  local layer layer_size config config_size manifest manifest_size
  read -r layer layer_size < <(blob "$dir/layer.tar")
  printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["%s"]}}' \
    "$layer" >"$dir/config.json"
  read -r config config_size < <(blob "$dir/config.json")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"%s","size":%s}]}' \
    "$config" "$config_size" "$layer" "$layer_size" >"$dir/manifest.json"
  read -r manifest manifest_size < <(blob "$dir/manifest.json")
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$manifest" "$manifest_size" "$pause_image" "${pause_image##*:}" >"$dir/oci/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' >"$dir/oci/oci-layout"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$dir/oci" -cf "$archive.tmp" .
  mv "$archive.tmp" "$archive"
  rm -rf "$dir"
}

# ---- PKI and kubeconfigs ---------------------------------------------------------------

# cert <name> <subject> [extensions]: an ECDSA key and a certificate signed by the CA.
cert() {
  local name=$1 subject=$2 ext=${3:-"extendedKeyUsage=clientAuth"}
  openssl ecparam -name prime256v1 -genkey -noout -out "$pki/$name.key" 2>/dev/null
  openssl req -new -key "$pki/$name.key" -subj "$subject" -out "$pki/$name.csr" 2>/dev/null
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -sha256 -extfile <(printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n%s\n' "$ext") \
    -out "$pki/$name.crt" 2>/dev/null
  rm -f "$pki/$name.csr"
}

# kubeconfig_for <cert name> <file>
kubeconfig_for() {
  cat >"$2" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $node
  cluster:
    server: $api_server
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: $1
  user:
    client-certificate-data: $(base64 -w0 "$pki/$1.crt")
    client-key-data: $(base64 -w0 "$pki/$1.key")
contexts:
- name: $node
  context: {cluster: $node, user: $1}
current-context: $node
EOF
  chmod 0600 "$2"
}

make_pki() {
  rm -rf "$pki"
  mkdir -p "$pki"
  chmod 0700 "$pki"
  openssl ecparam -name prime256v1 -genkey -noout -out "$pki/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=uring-e2e-ca" -days 30 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$pki/ca.crt" 2>/dev/null
  cert apiserver "/CN=kube-apiserver" "extendedKeyUsage=serverAuth
subjectAltName=IP:${service_cidr%.0/*}.1,IP:$node_ip,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert kubelet-serving "/CN=$node" "extendedKeyUsage=serverAuth
subjectAltName=IP:$node_ip,DNS:$node"
  cert admin "/O=system:masters/CN=uring-e2e-admin"
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  cert controller-manager "/CN=system:kube-controller-manager"
  cert scheduler "/CN=system:kube-scheduler"
  cert kubelet "/O=system:nodes/CN=system:node:$node"
  cert kube-proxy "/CN=system:kube-proxy"
  cert kube-router "/CN=system:kube-router"
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  for user in admin controller-manager scheduler kubelet kube-proxy kube-router; do
    kubeconfig_for "$user" "$pki/$user.kubeconfig"
  done
  cp "$pki/admin.kubeconfig" "$kubeconfig"
}

# ---- processes -------------------------------------------------------------------------

pid_of() { cat "$run/pids/$1.pid" 2>/dev/null; }
# A process that exited but is not reaped yet (our daemons are orphans, reaped by
# pid 1 whenever it gets to it) counts as gone.
alive() {
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $state != Z* ]]
}
running() {
  local pid
  pid=$(pid_of "$1") && [[ -n $pid ]] && alive "$pid"
}

# start <name> <command...>: own session, logs under bin/e2e/logs, pid recorded.
start() {
  local name=$1
  shift
  setsid "$@" >"$logs/$name.log" 2>&1 </dev/null &
  echo $! >"$run/pids/$name.pid"
}

# wait_for <what> <seconds> <command...>
wait_for() {
  local what=$1 deadline=$((SECONDS + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS > deadline)); then
      log "timed out waiting for $what; logs in $logs"
      exit 1
    fi
    sleep 0.2
  done
}

api_ready() {
  curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$api_server/readyz"
}

write_configs() {
  mkdir -p "$state/cni/net.d" "$state/containerd" "$run/containerd" "$run/cni-ipam" "$state/pod-logs" "$kubelet_root"
  cat >"$state/containerd/config.toml" <<EOF
version = 2
root = "$state/containerd"
state = "$run/containerd"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$containerd_sock"

[ttrpc]
  address = "$containerd_sock.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "$state/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  # Sub-tables last: a key written after a table header belongs to that table.
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$state/containerd/certs.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$state/cni/net.d"
EOF
  # The node's registry speaks plain HTTP; containerd would try HTTPS first.
  mkdir -p "$state/containerd/certs.d/$registry" "$state/registry"
  cat >"$state/containerd/certs.d/$registry/hosts.toml" <<EOF
server = "http://$registry"

[host."http://$registry"]
  capabilities = ["pull", "resolve"]
EOF
  cat >"$state/registry.yml" <<EOF
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: $state/registry}
  delete: {enabled: true}
http:
  addr: 127.0.0.1:${registry#*:}
EOF
  cat >"$state/cni/net.d/10-uring-e2e.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "uring-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$pod_cidr", "gateway": "$node_ip"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$run/cni-ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  cat >"$state/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$containerd_sock
clusterDNS: [$node_ip]
clusterDomain: cluster.local
podCIDR: $pod_cidr
resolvConf: /etc/resolv.conf
readOnlyPort: 0
failSwapOn: false
podLogsDir: $state/pod-logs
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
evictionPressureTransitionPeriod: 10s
nodeStatusReportFrequency: 10s
syncFrequency: 10s
fileCheckFrequency: 10s
EOF
  cat >"$state/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $pki/kube-proxy.kubeconfig}
mode: iptables
clusterCIDR: 10.244.0.0/16
hostnameOverride: $node
nodePortAddresses: [$node_ip/32]
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
oomScoreAdj: 0
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
  cat >"$state/Corefile" <<EOF
cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {
  bind $node_ip
  errors
  kubernetes cluster.local in-addr.arpa ip6.arpa {
    kubeconfig $pki/admin.kubeconfig
    pods insecure
  }
  cache 5
}
EOF
}

# Loop-mounted ext4 filesystems under the discovery directory, one per local PV.
make_disks() {
  local count=${E2E_DISKS:-10} size=${E2E_DISK_SIZE:-2G} i img loop
  mkdir -p "$state/disk-images" "$disks"
  # The provisioner sees mounts made after it started only through a shared (or
  # slave) mount, and / is private on this VM: make the volume tree its own shared mount.
  if ! mountpoint -q "${disks%/*}"; then
    mount --bind "${disks%/*}" "${disks%/*}"
    mount --make-rshared "${disks%/*}"
  fi
  for ((i = 0; i < count; i++)); do
    img=$state/disk-images/disk$i.img
    mountpoint -q "$disks/disk$i" && continue
    truncate -s "$size" "$img"
    mkfs.ext4 -q -F -L "uring-e2e-$i" "$img"
    loop=$(losetup --find --show "$img")
    mkdir -p "$disks/disk$i"
    mount -t ext4 "$loop" "$disks/disk$i"
  done
}

# Volumes with a slow, serial cache flush, like EBS gp3 (emulated): ext4 on a loop
# device whose image lives on fusedisk (images/redis-uring/tests/tools/fusedisk.c,
# the harness' gp3 volume), one fusedisk per volume so that one server's flushes
# never wait for another's. Every fsync of the image holds fusedisk's "device" for
# E2E_SLOW_FLUSH_US (1500); ext4's cache flushes and FUA writes become such fsyncs
# through the loop device, so every persistence mode pays the delay alike. What it
# does not model: flushes of one volume are serial, and writes are not slowed (EBS
# slows both). Each volume is a local PV of the StorageClass uring-gp3-like,
# written here (no provisioner: the PVs are Retain, and `down` removes them with the
# cluster).
make_slow_disks() {
  local count=${E2E_SLOW_DISKS:-0} delay=${E2E_SLOW_FLUSH_US:-1500} i dir img loop fusedisk
  ((count > 0)) || return 0
  "$repo/images/redis-uring/deps.sh"
  make -s -C "$repo/images/redis-uring" fusedisk >/dev/null
  fusedisk=$repo/bin/redis-uring/fusedisk
  mkdir -p "$state/slow-disks" "$slow_disks"
  for ((i = 0; i < count; i++)); do
    mountpoint -q "$slow_disks/disk$i" && continue
    dir=$state/slow-disks/disk$i
    mkdir -p "$dir.backing" "$dir.fuse"
    if ! mountpoint -q "$dir.fuse"; then
      start "fusedisk-$i" "$fusedisk" "$dir.backing" "$dir.fuse" -f -o "flush_delay_us=$delay"
      wait_for "fusedisk $i" 30 mountpoint -q "$dir.fuse"
    fi
    img=$dir.fuse/disk.img
    # Allocated, not sparse: the loop device's writes then allocate no host blocks.
    fallocate -l "${E2E_SLOW_DISK_SIZE:-1200M}" "$img"
    loop=$(losetup --find --show "$img")
    mkfs.ext4 -q -F -E nodiscard -L "uring-gp3-$i" "$loop"
    mkdir -p "$slow_disks/disk$i"
    mount -t ext4 "$loop" "$slow_disks/disk$i"
  done
  kubectl apply -f - >/dev/null <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $slow_class
  annotations: {uringredis.io/emulated: "ext4 on a loop device over fusedisk, every flush ${delay} us, serial"}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Retain
$(for ((i = 0; i < count; i++)); do
    cat <<PV
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: $slow_class-$i}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: $slow_class
  volumeMode: Filesystem
  local: {path: $slow_disks/disk$i, fsType: ext4}
  nodeAffinity:
    required:
      nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [$node]}]}]
PV
  done)
EOF
}

# What make_slow_disks made, undone in the order it was made: the ext4 mounts (and
# kubelet's bind mounts of them, gone with unmount_under before this), the loop
# devices, then the fusedisk daemons with their mounts.
remove_slow_disks() {
  local mnt pid
  for mnt in "$slow_disks"/*; do
    if mountpoint -q "$mnt"; then umount "$mnt"; fi
  done
  losetup -n -O NAME,BACK-FILE 2>/dev/null | awk -v s="$state/slow-disks/" 'index($2, s) == 1 { print $1 }' | xargs -r -n1 losetup -d
  for pid in "$run"/pids/fusedisk-*.pid; do
    [[ -f $pid ]] || continue
    pid=${pid##*/}
    stop "${pid%.pid}"
  done
  for mnt in "$state"/slow-disks/*.fuse; do
    if mountpoint -q "$mnt"; then umount -l "$mnt"; fi
  done
}

boot() {
  log "booting Kubernetes $k8s_version"
  mkdir -p "$run/pids" "$logs" "$state"
  rm -f "$logs"/*.log
  make_pki
  write_configs

  # Needed for pod <-> service traffic on the bridge; down puts the old values back.
  [[ -f $state/sysctl.saved ]] || sysctl net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables | tr -d ' ' >"$state/sysctl.saved"
  sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
  if ! ip link show cni0 >/dev/null 2>&1; then
    ip link add cni0 type bridge
    ip addr add "$node_ip/${pod_cidr#*/}" dev cni0
  fi
  ip link set cni0 up

  start etcd "$bins/etcd" --name "$node" --data-dir "$state/etcd" --unsafe-no-fsync \
    --listen-client-urls http://127.0.0.1:12379 --advertise-client-urls http://127.0.0.1:12379 \
    --listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 \
    --initial-cluster "$node=http://127.0.0.1:12380" --log-level warn
  start containerd containerd --config "$state/containerd/config.toml"
  start registry /usr/bin/docker-registry serve "$state/registry.yml"
  start kube-apiserver "$bins/kube-apiserver" \
    --etcd-servers http://127.0.0.1:12379 \
    --bind-address "$node_ip" --advertise-address "$node_ip" --secure-port 6443 \
    --service-cluster-ip-range "$service_cidr" \
    --client-ca-file "$pki/ca.crt" --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$pki/ca.crt" --kubelet-preferred-address-types InternalIP \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --allow-privileged=true \
    --profiling=false
  wait_for containerd 30 ctr --address "$containerd_sock" version
  ctr --address "$containerd_sock" -n k8s.io images import --all-platforms "$cache/pause.tar" >/dev/null
  import_images &
  images_pid=$!
  wait_for kube-apiserver 60 api_ready
  wait_for "the registry on $registry" 30 curl -sf "http://$registry/v2/"
  log "API server and registry ready after ${SECONDS}s"

  start kube-controller-manager "$bins/kube-controller-manager" \
    --kubeconfig "$pki/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$pki/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$pki/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
    --service-cluster-ip-range "$service_cidr" --allocate-node-cidrs=false \
    --controllers '*,-service-lb-controller,-node-route-controller,-cloud-node-lifecycle-controller'
  start kube-scheduler "$bins/kube-scheduler" \
    --kubeconfig "$pki/scheduler.kubeconfig" \
    --authentication-kubeconfig "$pki/scheduler.kubeconfig" \
    --authorization-kubeconfig "$pki/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false
  start kubelet "$bins/kubelet" --config "$state/kubelet.yaml" --kubeconfig "$pki/kubelet.kubeconfig" \
    --hostname-override "$node" --node-ip "$node_ip" --root-dir "$kubelet_root" --oom-score-adj=0
  start kube-proxy "$bins/kube-proxy" --config "$state/kube-proxy.yaml"
  start coredns "$cache/bin/coredns-$coredns_version" -conf "$state/Corefile"

  # Pods need these before they can start; creating them beats waiting for controllers.
  wait_for "namespace default" 30 kubectl get namespace default
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: {name: default, namespace: default}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: kube-root-ca.crt, namespace: default}
data:
  ca.crt: |
$(sed 's/^/    /' "$pki/ca.crt")
EOF

  wait_for "node $node to be Ready" 60 node_ready
  kubectl taint node "$node" node.kubernetes.io/not-ready- >/dev/null 2>&1 || true
  log "node Ready after ${SECONDS}s"

  # The NetworkPolicy enforcer reads the node, pods, namespaces and policies (its
  # informers watch Services and endpoints too).
  kubectl apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: uring-e2e:kube-router}
rules:
  - {apiGroups: [""], resources: [namespaces, pods, services, nodes, endpoints], verbs: [get, list, watch]}
  - {apiGroups: [networking.k8s.io], resources: [networkpolicies], verbs: [get, list, watch]}
  - {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: uring-e2e:kube-router}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: uring-e2e:kube-router}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: system:kube-router}]
EOF
  start kube-router "$kube_router" --kubeconfig "$pki/kube-router.kubeconfig" --hostname-override "$node" \
    --run-firewall=true --run-router=false --run-service-proxy=false --service-cluster-ip-range "$service_cidr" \
    --metrics-port 0 --health-port "$router_health_port"
  wait_for "kube-router's NetworkPolicy controller" 60 curl -sf "http://127.0.0.1:$router_health_port/healthz"
  log "NetworkPolicies enforced after ${SECONDS}s"
}

node_ready() {
  [[ $(kubectl get node "$node" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}') == True ]]
}

# The local-static-provisioner DaemonSet and its StorageClass; its image comes from
# e2e/images (built on first use, then cached as an archive that import_images loads).
# With E2E_STORAGE=chart the disks are made but the chart's localNvme preset deploys the
# provisioner and the class (`make e2e`), so the suite runs on the production path;
# a provisioner this script deployed earlier is removed so the two never compete.
deploy_storage() {
  [[ -f $repo/bin/e2e/images/local-volume-provisioner.tar ]] || "$repo/e2e/images/build.sh" local-volume-provisioner
  local manifest
  manifest=$(sed -e "s|@DISCOVERY_DIR@|$disks|g" -e "s|@STORAGE_CLASS@|$storage_class|g" "$here/local-provisioner.yaml")
  if [[ ${E2E_STORAGE:-cluster} == chart ]]; then
    kubectl delete --ignore-not-found -f - <<<"$manifest" >/dev/null
  else
    kubectl apply -f - <<<"$manifest" >/dev/null
  fi
}

# The test bed's own images built earlier by e2e/images/build.sh (the local volume
# provisioner, the io_uring probe, smoke.sh's exporter, the suite's object store and
# the demo's Prometheus: fixtures of this node, not part of a release, needed before
# anything is pushed), so a re-created cluster has them (runs while the control plane
# boots). The project's images are never imported: the node pulls them from the
# registry. Not unpacked: containerd unpacks an image when a container first uses it.
import_images() {
  local archive
  for archive in "$repo"/bin/e2e/images/*.tar; do
    case ${archive##*/} in local-volume-provisioner.tar | uring-probe.tar | redis-exporter.tar | seaweedfs.tar | prometheus.tar) ;; *) continue ;; esac
    ctr --address "$containerd_sock" -n k8s.io images import --all-platforms --no-unpack "$archive" >/dev/null
  done
}

wait_for_pvs() {
  local want=${E2E_DISKS:-10}
  (($(kubectl get pv -o name | wc -l) >= want))
}

# ---- teardown --------------------------------------------------------------------------

stop() {
  local name=$1 pid
  pid=$(pid_of "$name") || return 0
  if alive "$pid"; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do
      alive "$pid" || break
      sleep 0.1
    done
    if alive "$pid"; then kill -9 "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$run/pids/$name.pid"
}

# Kill every container and its shim while containerd still answers; the shims'
# pids are the ones containerd recorded under our state directory.
stop_containers() {
  local c=(ctr --address "$containerd_sock" -n k8s.io) id pidfile
  if running containerd; then
    for id in $("${c[@]}" tasks ls -q 2>/dev/null); do
      "${c[@]}" tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    sleep 0.5
    for id in $("${c[@]}" tasks ls -q 2>/dev/null); do
      "${c[@]}" tasks rm -f "$id" >/dev/null 2>&1 || true
    done
  fi
  for pidfile in "$run"/containerd/io.containerd.runtime.v2.task/*/*/shim.pid; do
    if [[ -f $pidfile ]]; then kill -9 "$(cat "$pidfile")" 2>/dev/null || true; fi
  done
}

# Every mount at or below the given directories, deepest first (kubelet bind-mounts
# its root dir onto itself).
unmount_under() {
  local dir
  for dir in "$@"; do
    findmnt -rn -o TARGET | awk -v d="$dir" '$0 == d || index($0, d "/") == 1' | sort -r |
      xargs -r -n1 umount -l 2>/dev/null || true
  done
}

# Delete KUBE-* and CNI-* chains and every rule that jumps to them: one
# iptables-restore --noflush per table, so nothing else in the table is touched.
clean_iptables() {
  local family table rules
  for family in iptables ip6tables; do
    command -v "$family-restore" >/dev/null || continue
    for table in filter nat mangle; do
      rules=$("$family" -t "$table" -S 2>/dev/null) || continue
      awk -v table="$table" '
        $1 == "-N" && $2 ~ /^(KUBE|CNI)-/ { chains[++n] = $2 }
        $1 == "-A" && $2 !~ /^(KUBE|CNI)-/ && / -j (KUBE|CNI)-/ { sub(/^-A/, "-D"); jumps[++m] = $0 }
        END {
          if (n + m == 0) exit
          print "*" table
          for (i = 1; i <= n; i++) print ":" chains[i] " - [0:0]"
          for (i = 1; i <= m; i++) print jumps[i]
          for (i = 1; i <= n; i++) print "-X " chains[i]
          print "COMMIT"
        }' <<<"$rules" | "$family-restore" --noflush 2>/dev/null || true
    done
  done
}

# kube-router's ipsets (KUBE-SRC-*, KUBE-DST-*; inet6: for IPv6), once no rule uses them.
clean_ipsets() {
  command -v ipset >/dev/null || return 0
  ipset list -n 2>/dev/null | grep -E '^(inet6:)?KUBE-' | xargs -r -n1 ipset destroy 2>/dev/null || true
}

# kubepods cgroups, deepest first (they are empty once the containers are gone).
clean_cgroups() {
  local dir
  for dir in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/kubepods.slice; do
    [[ -d $dir ]] || continue
    find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}

teardown() {
  log "stopping"
  local name
  for name in kube-router coredns kube-proxy kubelet kube-scheduler kube-controller-manager; do stop "$name"; done
  stop_containers
  for name in containerd kube-apiserver etcd registry; do stop "$name"; done
  unmount_under "$kubelet_root" "$run" "${disks%/*}"
  remove_slow_disks
  unmount_under "$state"
  local mnt img
  for mnt in "$disks"/*; do
    if mountpoint -q "$mnt"; then umount "$mnt"; fi
  done
  for img in "$state"/disk-images/*.img; do
    [[ -f $img ]] || continue
    losetup -j "$img" -O NAME -n | xargs -r -n1 losetup -d
  done
  ip link del cni0 2>/dev/null || true
  if [[ -f $state/sysctl.saved ]]; then
    local saved
    mapfile -t saved <"$state/sysctl.saved" # one key=value a line
    sysctl -qw "${saved[@]}"
  fi
  clean_iptables
  clean_ipsets
  clean_cgroups
  # --one-file-system: a mount that survived the unmounts is skipped, never emptied.
  rm -rf --one-file-system "$state" "$run" "$kubelet_root" "${disks%/*}" "$pki" "$kubeconfig"
  # Fixed paths that kubelet and containerd's CNI library write to: our entries only,
  # then the directories if that left them empty.
  find /var/log/containers -maxdepth 1 -type l -lname "$state/*" -delete 2>/dev/null || true
  rm -f /var/lib/cni/results/uring-e2e-* /var/lib/cni/results/cni-loopback-*
  rmdir /var/log/containers /var/lib/cni/results /var/lib/cni 2>/dev/null || true
}

# What a stopped test bed must not leave behind; prints one line per thing found.
leftovers() {
  local dir
  for dir in "$state" "$run" "$kubelet_root" "${disks%/*}"; do
    [[ ! -e $dir ]] || echo "directory $dir"
  done
  findmnt -rn -o TARGET | awk -v a="$kubelet_root" -v b="$run" -v c="$state" -v d="${disks%/*}" \
    '$0 == a || $0 == b || $0 == c || $0 == d || index($0, a "/") == 1 || index($0, b "/") == 1 || index($0, c "/") == 1 || index($0, d "/") == 1 { print "mount " $0 }'
  losetup -n -O NAME,BACK-FILE 2>/dev/null | awk -v s="$state/" 'index($2, s) == 1 { print "loop device " $1 }'
  ! ip link show cni0 >/dev/null 2>&1 || echo "link cni0"
  local family
  for family in iptables ip6tables; do
    "$family-save" 2>/dev/null | awk -v f="$family" '/^:(KUBE|CNI)-/ { print f " chain " substr($1, 2) }'
  done
  if command -v ipset >/dev/null; then ipset list -n 2>/dev/null | awk '/^(inet6:)?KUBE-/ { print "ipset " $0 }'; fi
  find /sys/fs/cgroup -maxdepth 2 -name 'kubepods*' -printf 'cgroup %p\n' 2>/dev/null
  pgrep -a -f "containerd-shim-runc-v2 .*-address $containerd_sock" | sed 's/^/process /' || true
}

status() {
  local name any=
  for name in "${components[@]}"; do
    if running "$name"; then
      printf '%-24s running (pid %s)\n' "$name" "$(pid_of "$name")"
      any=1
    else
      printf '%-24s stopped\n' "$name"
    fi
  done
  if [[ -z $any ]]; then
    local left
    left=$(leftovers)
    [[ -z $left ]] || printf 'left behind by an earlier run (cluster.sh down removes it):\n%s\n' "$left"
    return 1
  fi
  echo "kubeconfig: $kubeconfig"
  echo "logs: $logs"
  kubectl get nodes -o wide 2>/dev/null || true
  kubectl get storageclass,pv 2>/dev/null || true
}

# Up means every component runs and the last `up` got to the end (storage included).
all_running() {
  local name
  [[ -f $run/complete ]] || return 1
  for name in "${components[@]}"; do running "$name" || return 1; done
  api_ready >/dev/null 2>&1
}

up() {
  local start=$SECONDS
  if all_running; then
    log "already up"
    deploy_storage
    make_slow_disks
  else
    ensure_binaries
    ensure_pause_image
    teardown 2>/dev/null # whatever a crashed run left
    log "binaries ready and old state cleared after ${SECONDS}s"
    boot
    wait "$images_pid"
    log "images imported after ${SECONDS}s"
    make_disks
    deploy_storage
    make_slow_disks
    [[ ${E2E_STORAGE:-cluster} == chart ]] || wait_for "local PVs" 120 wait_for_pvs
    touch "$run/complete"
    log "up in $((SECONDS - start))s"
  fi
  echo "export KUBECONFIG=$kubeconfig"
}

case ${1:-} in
  up) up ;;
  down) teardown ;;
  status) status ;;
  # The CoreDNS binary, for the kind node image (e2e/kind/kind.sh).
  coredns) ensure_binaries && echo "$cache/bin/coredns-$coredns_version" ;;
  *)
    echo "usage: $0 up|down|status|coredns" >&2
    exit 2
    ;;
esac
