#!/usr/bin/env bash
# A multi-node kind cluster for the e2e suite and the demo, built and run on this
# machine with nothing from outside but the package archives.
#
#   e2e/kind/kind.sh up       # images (cached), registry, cluster, pod network, disks
#   e2e/kind/kind.sh load     # bin/e2e/images/*.tar into every node
#   e2e/kind/kind.sh down     # cluster, registry, daemon and disks (caches under bin/ stay)
#   e2e/kind/kind.sh status
#
# kind itself is built from its Go module (KIND, from the Makefile). Its node image
# is built here (node/Dockerfile) on a base built from the local Debian base with
# kind's own base files (base/Dockerfile), from the Kubernetes binaries
# hack/k8s-binaries.sh builds from source, with every image the cluster starts with
# already in the node's containerd: the control plane and kube-proxy from the same
# binaries, etcd from Debian, CoreDNS from its module, pause from
# e2e/cluster/pause.c, kube-router (images/Dockerfile). README.md says why this is
# not `kind build node-image`.
#
# Docker: Debian's dockerd, a private instance for kind (socket under /run/uring-kind,
# data root bin/e2e/kind/docker), apart from e2e/images/build.sh's builder, which stops
# when a build ends. It runs without iptables, so it never changes the host's
# firewall (the offline cluster's bridge shares it): the nodes talk on the kind
# bridge, and the host reaches the API server and the registry through docker-proxy
# on 127.0.0.1. Its OCI runtime is runc-host-caps (this VM lacks a capability
# Docker 20.10 gives every privileged container).
#
# Nodes: a control plane and E2E_KIND_WORKERS workers (3), so that anti-affinity
# Required places a primary and its replicas on different nodes and a test can
# lose a whole node (docker stop). Each worker gets E2E_KIND_DISKS ext4 loop volumes
# (8, E2E_DISK_SIZE 2G each) mounted on the host under $state/disks/<node>/ and
# bind-mounted into the node at the discovery directory of the chart's localNvme
# preset, as the offline cluster does with its one node: kind's default storage (a
# host-path provisioner on the node's own filesystem) is not the ext4 the operator
# requires.
#
# Registry: kind's local-registry recipe. A distribution registry container
# (Debian's docker-registry) on the kind network, published on 127.0.0.1:$port; each
# node's containerd maps localhost:$port to it (certs.d/hosts.toml), so image
# references are the same from the host (make release pushes there) and the nodes.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
kind_bin=${KIND:-$repo/bin/kind}
name=uring-e2e
workers=${E2E_KIND_WORKERS:-3}
disks_per_node=${E2E_KIND_DISKS:-8}
port=${E2E_KIND_REGISTRY_PORT:-5001}
cache=$repo/bin/e2e/kind
run=/run/uring-kind
state=/var/lib/uring-kind
kubeconfig=${E2E_KUBECONFIG:-$repo/bin/e2e/kind.kubeconfig}
discovery=/mnt/uring-e2e/local-ext4 # charts/uring-redis-operator/ci/e2e-values.yaml
k8s_version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$repo/hack/k8s/go.mod")
kind_version=$("$kind_bin" version 2>/dev/null | awk '{print $2}') || true
docker=(/usr/bin/docker -H "unix://$run/docker.sock")
export DOCKER_BUILDKIT=1
# kind runs `docker`: Debian's client, on this daemon.
export DOCKER_HOST=unix://$run/docker.sock
mkdir -p "$cache/path"
ln -sf /usr/bin/docker "$cache/path/docker"
export PATH=$cache/path:$PATH
kubectl_bin=$("$repo/hack/k8s-binaries.sh" kubectl)/kubectl
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" "$@"; }
log() { echo "kind: $*" >&2; }

# kind's daemon (e2e/images/dockerd.sh), whose OCI runtime is runc-host-caps. Debian's
# docker.io is among the host packages: on a new machine it is installed here, first.
start_docker() {
  "$repo/e2e/cluster/host-deps.sh" >&2
  mkdir -p "$cache"
  "$repo/e2e/images/dockerd.sh" start "$run" "$cache/docker" uring-kind-docker "$cache/dockerd.log" \
    --add-runtime "host-caps=$here/runc-host-caps" --default-runtime host-caps
}

stop_docker() { "$repo/e2e/images/dockerd.sh" stop "$run" uring-kind-docker; }

has_image() { "${docker[@]}" image inspect "$1" >/dev/null 2>&1; }

# Everything the node image is made of, staged under $cache/node-context; its
# tag is a digest of them, so an unchanged tree reuses the image.
stage_node() {
  local ctx=$cache/node-context bins coredns
  bins=$("$repo/hack/k8s-binaries.sh" kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd)
  coredns=$("$repo/e2e/cluster/cluster.sh" coredns)
  local router
  router=$("$repo/hack/kube-router.sh")
  rm -rf "$ctx"
  mkdir -p "$ctx/bin" "$ctx/kind/manifests" "$ctx/images"
  for b in kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd; do
    ln "$bins/$b" "$ctx/bin/$b" 2>/dev/null || cp "$bins/$b" "$ctx/bin/$b"
  done
  cp "$coredns" "$ctx/bin/coredns"
  cp "$router" "$ctx/bin/kube-router"
  gcc -static -O2 -s -o "$ctx/bin/pause" "$repo/e2e/cluster/pause.c"
  printf '%s' "$k8s_version" >"$ctx/kind/version"
  cp "$here/default-storage.yaml" "$ctx/kind/manifests/default-storage.yaml"
  node_tag=$( (cd "$ctx" && find bin kind -type f -print0 | sort -z | xargs -0 sha256sum; cat "$here"/{base,images,node}/Dockerfile; echo "$kind_version") |
    sha256sum | cut -c1-12)
  node_image=uring-kind/node:$k8s_version-$node_tag
}

build_image() {
  local image=$1 context=$2
  shift 2
  "${docker[@]}" build --progress plain --network host --build-arg BASE_IMAGE=debian:trixie-slim \
    -t "$image" "$@" "$context" >"$cache/build.log" 2>&1 ||
    { tail -30 "$cache/build.log" >&2; log "build of $image failed; see $cache/build.log"; exit 1; }
}

# The node image and what it is built from: the base, the images it carries.
ensure_node_image() {
  stage_node
  if has_image "$node_image"; then return; fi
  local start=$SECONDS kind_src rootfs
  kind_src=$(go mod download -json "sigs.k8s.io/kind@$kind_version" | awk -F'"' '$2 == "Dir" {print $4}')
  rootfs=$("$repo/e2e/images/build.sh" --rootfs)
  has_image debian:trixie-slim || "${docker[@]}" import --change 'CMD ["bash"]' "$rootfs" debian:trixie-slim >/dev/null
  log "building the base image from kind $kind_version's base files"
  build_image uring-kind/base:local "$kind_src/images/base" -f "$here/base/Dockerfile"
  local ctx=$cache/node-context image
  declare -A names=(
    [kube-apiserver]=registry.k8s.io/kube-apiserver:$k8s_version
    [kube-controller-manager]=registry.k8s.io/kube-controller-manager:$k8s_version
    [kube-scheduler]=registry.k8s.io/kube-scheduler:$k8s_version
    [kube-proxy]=registry.k8s.io/kube-proxy:$k8s_version
    [etcd]="" [coredns]="" [pause]="" [kube-router]=uring-kind/kube-router:local
  )
  # The names kubeadm runs, and the sandbox image of kind's containerd configuration.
  local listed
  listed=$("$ctx/bin/kubeadm" config images list --kubernetes-version "$k8s_version")
  names[etcd]=$(grep '/etcd:' <<<"$listed")
  names[coredns]=$(grep '/coredns:' <<<"$listed")
  names[pause]=$(sed -n 's/^ *sandbox_image *= *"\(.*\)"/\1/p' "$kind_src/images/base/files/etc/containerd/config.toml")
  for image in "${!names[@]}"; do
    log "building ${names[$image]}"
    build_image "${names[$image]}" "$ctx" -f "$here/images/Dockerfile" --target "$image"
    "${docker[@]}" save -o "$ctx/images/$image.tar" "${names[$image]}"
  done
  log "building $node_image"
  build_image "$node_image" "$ctx" -f "$here/node/Dockerfile" --build-arg BASE_IMAGE=uring-kind/base:local
  rm -rf "$ctx/images"
  log "node image ready in $((SECONDS - start))s"
}

ensure_registry() {
  has_image uring-kind/registry:local ||
    build_image uring-kind/registry:local "$here/registry"
  if [[ $("${docker[@]}" inspect -f '{{.State.Running}}' kind-registry 2>/dev/null) != true ]]; then
    "${docker[@]}" rm -f kind-registry >/dev/null 2>&1 || true
    "${docker[@]}" network disconnect -f kind kind-registry >/dev/null 2>&1 || true
    mkdir -p "$cache/registry"
    "${docker[@]}" run -d --restart=always --name kind-registry --network kind -p "127.0.0.1:$port:5000" \
      -v "$cache/registry:/var/lib/docker-registry" uring-kind/registry:local >/dev/null
  fi
  for _ in $(seq 50); do
    curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && return
    sleep 0.2
  done
  log "the registry does not answer on 127.0.0.1:$port; docker logs kind-registry:"
  "${docker[@]}" logs kind-registry 2>&1 | tail -5 >&2
  exit 1
}

worker_names() {
  local i
  echo "$name-worker"
  for ((i = 2; i <= workers; i++)); do echo "$name-worker$i"; done
}

make_disks() {
  local node i img loop dir
  for node in $(worker_names); do
    dir=$state/disks/$node
    mkdir -p "$dir" "$state/disk-images"
    for ((i = 0; i < disks_per_node; i++)); do
      mountpoint -q "$dir/disk$i" && continue
      img=$state/disk-images/$node-disk$i.img
      truncate -s "${E2E_DISK_SIZE:-2G}" "$img"
      mkfs.ext4 -q -F -L "kind-$i" "$img"
      loop=$(losetup --find --show "$img")
      mkdir -p "$dir/disk$i"
      mount -t ext4 "$loop" "$dir/disk$i"
    done
  done
}

cluster_config() {
  local node
  cat <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  # kube-router (kube-router.yaml) is the pod network and NetworkPolicy enforcer.
  disableDefaultCNI: true
containerdConfigPatches:
- |-
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/containerd/certs.d"
# This VM has no CAP_SYS_RESOURCE: nothing may lower an oom_score_adj, so
# containerd clamps the pods' scores and the kubelet and kube-proxy keep 0 (as
# on the offline cluster).
- |-
  [plugins."io.containerd.grpc.v1.cri"]
    restrict_oom_score_adj = true
kubeadmConfigPatches:
- |
  kind: KubeletConfiguration
  oomScoreAdj: 0
- |
  kind: KubeProxyConfiguration
  oomScoreAdj: 0
nodes:
- role: control-plane
EOF
  for node in $(worker_names); do
    cat <<EOF
- role: worker
  extraMounts:
  - hostPath: $state/disks/$node
    containerPath: $discovery
EOF
  done
}

cluster_exists() { grep -qx "$name" <<<"$("$kind_bin" get clusters 2>/dev/null)"; }

up() {
  local start=$SECONDS node
  [[ -x $kind_bin ]] || { log "no kind at $kind_bin (make e2e-up builds it)"; exit 1; }
  start_docker
  ensure_node_image
  if ! cluster_exists; then
    make_disks
    cluster_config >"$cache/cluster.yaml"
    log "creating $name: a control plane and $workers workers"
    "$kind_bin" create cluster --name "$name" --image "$node_image" --config "$cache/cluster.yaml" \
      --kubeconfig "$kubeconfig"
  fi
  ensure_registry
  for node in $("$kind_bin" get nodes --name "$name"); do
    "${docker[@]}" exec "$node" sh -ec "mkdir -p /etc/containerd/certs.d/localhost:$port
      printf '[host.\"http://kind-registry:5000\"]\n' >/etc/containerd/certs.d/localhost:$port/hosts.toml"
  done
  kubectl apply -f "$here/kube-router.yaml" >/dev/null
  kubectl wait --for=condition=Ready nodes --all --timeout=300s >/dev/null
  [[ -f $repo/bin/e2e/images/local-volume-provisioner.tar ]] || "$repo/e2e/images/build.sh" local-volume-provisioner
  load
  log "up in $((SECONDS - start))s"
  echo "export KUBECONFIG=$kubeconfig"
}

# The test bed's own images (the provisioner, the probe, the object store), built by
# e2e/images/build.sh into bin/e2e/images and imported into every node, as the
# offline cluster imports them into its one.
load() {
  local archive
  for archive in "$repo"/bin/e2e/images/*.tar; do
    [[ -f $archive && $archive != */debian-trixie-minbase.tar ]] || continue
    "$kind_bin" load image-archive --name "$name" "$archive" >/dev/null
  done
}

down() {
  if [[ -S $run/docker.sock ]] && "${docker[@]}" version >/dev/null 2>&1; then
    cluster_exists && "$kind_bin" delete cluster --name "$name" --kubeconfig "$kubeconfig"
    "${docker[@]}" rm -f kind-registry >/dev/null 2>&1 || true
    stop_docker
  fi
  local mnt img
  for mnt in "$state"/disks/*/disk*; do
    mountpoint -q "$mnt" && umount "$mnt"
  done
  for img in "$state"/disk-images/*.img; do
    [[ -f $img ]] || continue
    losetup -j "$img" -O NAME -n | xargs -r -n1 losetup -d
  done
  rm -rf --one-file-system "$state"
  rm -f "$kubeconfig"
}

status() {
  start_docker
  "${docker[@]}" ps --format '{{.Names}}\t{{.Status}}'
  kubectl get nodes -o wide
}

case ${1:-} in
  up) up ;;
  load) start_docker && load ;;
  down) down ;;
  status) status ;;
  *)
    echo "usage: $0 up|down|status" >&2
    exit 2
    ;;
esac
