#!/usr/bin/env bash
# Build Kubernetes binaries from source and fetch etcd, offline-friendly and cached.
#
#   hack/k8s-binaries.sh kube-apiserver etcd          # what envtest needs
#   hack/k8s-binaries.sh kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl etcd
#   hack/k8s-binaries.sh kubeadm                      # kind node images (e2e/kind)
#
# Binaries land in bin/k8s/<version>/ (KUBEBUILDER_ASSETS for envtest). Kubernetes
# components are built from the k8s.io/kubernetes module pinned in hack/k8s/go.mod
# (through the Go module proxy, no release download); etcd is Debian trixie's
# etcd-server package, unpacked, never installed on the host. A binary that is
# already there is not rebuilt, so the script is cheap to call on every test run.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$here/k8s/go.mod")
etcd_version=${ETCD_DEB_VERSION:-3.5.16-4}
# sha256 of etcd-server_3.5.16-4_amd64.deb; empty when ETCD_DEB_VERSION overrides the pin.
etcd_sha256=0875921bb0d023f2af9b8e15cdfbe417a03e65731345fb832c40f9c2dd72967b
[[ -z ${ETCD_DEB_VERSION:-} ]] || etcd_sha256=
out=${K8S_BIN_DIR:-$repo/bin/k8s/$version}
mkdir -p "$out"

build_k8s() {
  local name=$1 major minor
  major=${version#v}; major=${major%%.*}
  minor=${version#v*.}; minor=${minor%%.*}
  local ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "k8s-binaries: building $name $version (cold: minutes)" >&2
  (cd "$here/k8s" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/$name.tmp" "k8s.io/kubernetes/cmd/$name")
  mv "$out/$name.tmp" "$out/$name"
}

fetch_etcd() {
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  echo "k8s-binaries: fetching etcd-server $etcd_version" >&2
  # The pinned .deb from the pool first (trixie's index moves on with updates), then apt.
  # shellcheck disable=SC2015 # apt is the fallback whenever the pool fetch is skipped or fails
  (cd "$tmp" && { [[ -n $etcd_sha256 ]] && "$here/apt-trixie.sh" pool "main/e/etcd/etcd-server_${etcd_version}_amd64.deb" "$etcd_sha256"; } ||
    "$here/apt-trixie.sh" -qq download "etcd-server=$etcd_version")
  dpkg-deb -x "$tmp"/etcd-server_*.deb "$tmp/root"
  install -m 0755 "$tmp/root/usr/bin/etcd" "$out/etcd"
}

for name in "$@"; do
  [[ -x $out/$name ]] && continue
  case $name in
    etcd) fetch_etcd ;;
    kube-apiserver | kube-controller-manager | kube-scheduler | kubelet | kube-proxy | kubectl | kubeadm) build_k8s "$name" ;;
    *) echo "k8s-binaries: unknown binary $name" >&2; exit 2 ;;
  esac
done
echo "$out"
