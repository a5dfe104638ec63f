#!/usr/bin/env bash
# Build the project's container images offline, and push them to a registry or load
# them into the e2e cluster.
#
#   e2e/images/build.sh [name...]            # no names: every image whose Dockerfile exists
#   e2e/images/build.sh --push DIR name...   # push each to its registry instead (hack/release.sh);
#                                            # DIR/<name>.digest gets the pushed digest
#
# No registry is reachable, so the bases are made here: a debootstrap'd Debian trixie
# minbase rootfs imported as debian:trixie-slim, and a Go builder image (that base plus
# the host's Go toolchain) tagged golang:<go version>-trixie and golang:<major.minor>-trixie.
# Dockerfiles take them as build args (BASE_IMAGE, GO_IMAGE; REDIS_IMAGE for images built
# on the server image) whose defaults name the upstream images, so the same files build
# with plain Docker elsewhere.
#
# The builder is Debian's dockerd, started privately for the duration of the script
# (own socket, data root under bin/e2e/docker, no iptables, no bridge: RUN steps use
# host networking so apt and the Go module proxy work). With --push, each image goes
# to the registry its tag names (the project's images and redis_exporter, which the
# chart pulls from a registry); otherwise it is saved to bin/e2e/images/<name>.tar,
# which `cluster.sh up` imports, and when the cluster is already up the image is
# imported right away (the test bed's own images: the provisioner, the probe and the
# suite's object store, SeaweedFS).
#
# Tags come from hack/release.sh (IMG, REDIS_IMG, BENCH_IMG, EXPORTER_IMG: the release
# references); without it the project's images get local names of the working tree
# (uring-redis-operator:local, ...), which no chart default names; redis_exporter and
# the provisioner carry their upstream names.
# E2E_REFRESH_BASE=1 rebuilds the Debian rootfs; E2E_KEEP_BUILDER=1 leaves dockerd running
# for the next call (the next call without it stops it).
#
# PLATFORMS (hack/release.sh sets it) names the platforms each image is built for, e.g.
# "linux/amd64 linux/arm64"; default the host's alone, built and tagged as above. linux/arm64
# on this amd64 host: its base is a rootfs debootstrapped for arm64, loaded under the name
# Docker Hub gives that architecture's image (arm64v8/debian:trixie-slim), and its RUN steps
# run under qemu-user through binfmt_misc (hack/binfmt-arm64.sh); the Dockerfiles compile on
# the host's platform (FROM --platform=$BUILDPLATFORM): Go with GOARCH, the server with
# Debian's cross toolchain. A foreign platform's image is tagged <image>-<arch> and kept in
# the daemon (no tarball: the test bed's node is the host's architecture). With --push and
# several platforms, each platform's image is pushed as <image>-<arch> and crane assembles
# <image>, one OCI index of them, whose digest is the one written to DIR.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=$repo/bin/e2e/images
run=/run/uring-e2e/docker
go_version=$(go env GOVERSION) # go1.26.8
go_version=${go_version#go}
go_image=golang:${go_version%.*}-trixie
base_image=debian:trixie-slim
host_arch=$(dpkg --print-architecture)
read -ra platforms <<<"${PLATFORMS:-linux/$host_arch}"
crane=${CRANE:-$repo/bin/crane}
docker=(/usr/bin/docker -H "unix://$run/docker.sock")
# BuildKit (built into Debian's dockerd): the Go Dockerfiles keep their module and
# build caches in cache mounts, shared by every build of this daemon.
export DOCKER_BUILDKIT=1
containerd_sock=/run/uring-e2e/containerd/containerd.sock

# name -> "image|Dockerfile|context" (paths relative to the repo). The project's own
# Dockerfiles build with the repository root as context (the root .dockerignore keeps
# bin/ and .git out), like `docker build -f images/redis-uring/Dockerfile .`.
declare -A images=(
  [uring-redis-operator]="${IMG:-uring-redis-operator:local}|Dockerfile|."
  [redis-uring]="${REDIS_IMG:-redis-uring:local}|images/redis-uring/Dockerfile|."
  [uring-redis-bench]="${BENCH_IMG:-uring-redis-bench:local}|images/bench/Dockerfile|."
  [redis-exporter]="${EXPORTER_IMG:-oliver006/redis_exporter:$(awk '$1 == "require" {print $3}' "$here/redis-exporter/go.mod")}|e2e/images/redis-exporter/Dockerfile|e2e/images/redis-exporter"
  [local-volume-provisioner]="registry.k8s.io/sig-storage/local-volume-provisioner:v2.7.0|e2e/images/local-volume-provisioner/Dockerfile|e2e/images/local-volume-provisioner"
  [uring-probe]="uring-probe:e2e|e2e/images/uring-probe/Dockerfile|e2e/images/uring-probe"
  [seaweedfs]="seaweedfs:e2e|e2e/images/seaweedfs/Dockerfile|bin/seaweedfs"
  [prometheus]="prometheus:e2e|e2e/images/prometheus/Dockerfile|bin/prometheus"
)
order=(local-volume-provisioner redis-exporter uring-probe seaweedfs prometheus redis-uring uring-redis-operator uring-redis-bench)

log() { echo "images: $*" >&2; }

start_docker() {
  mkdir -p "$cache"
  "$here/dockerd.sh" start "$run" "$repo/bin/e2e/docker" uring-e2e-docker "$cache/dockerd.log"
}

stop_docker() { "$here/dockerd.sh" stop "$run" uring-e2e-docker; }

has_image() { "${docker[@]}" image inspect "$1" >/dev/null 2>&1; }

debian_mirror() {
  local uris
  uris=$(grep -hs -e '^URIs:' -e '^deb ' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list |
    grep -o 'https\?://[^ ]*' || true)
  echo "${DEBIAN_MIRROR:-$(grep -m1 '/debian/\?$' <<<"$uris" || true)} ${DEBIAN_SECURITY_MIRROR:-$(grep -m1 '/debian-security/\?$' <<<"$uris" || true)}"
}

# The debian:trixie-slim base of an architecture (the host's by default).
base_for() { if [[ ${1:-$host_arch} == "$host_arch" ]]; then echo "$base_image"; else echo "arm64v8/$base_image"; fi; }
# Where the rootfs tarball of an architecture is cached.
tarball_for() { if [[ ${1:-$host_arch} == "$host_arch" ]]; then echo "$cache/debian-trixie-minbase.tar"; else echo "$cache/debian-trixie-minbase-$1.tar"; fi; }

# The debootstrap rootfs tarball of debian:trixie-slim (ARCH: the host's by default), made once and cached.
rootfs_tarball() {
  local arch=${1:-$host_arch} tarball
  tarball=$(tarball_for "$arch")
  if [[ ! -f $tarball || -n ${E2E_REFRESH_BASE:-} ]]; then
    local mirror security rootfs
    read -r mirror security < <(debian_mirror)
    [[ -n $mirror ]] || { log "no Debian mirror in /etc/apt; set DEBIAN_MIRROR"; exit 1; }
    rootfs=$(mktemp -d "$cache/rootfs.XXXXXX")
    local what="about a minute" debootstrap_log=$cache/debootstrap.log
    # A foreign architecture's second stage runs in the chroot under qemu-user.
    [[ $arch == "$host_arch" ]] || what="about 4 min under emulation" debootstrap_log=$cache/debootstrap-$arch.log
    log "debootstrap --variant=minbase --arch=$arch trixie (cold: $what)"
    debootstrap --variant=minbase --arch="$arch" --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
      trixie "$rootfs" "$mirror" >"$debootstrap_log" 2>&1 ||
      { log "debootstrap failed; see $debootstrap_log"; exit 1; }
    # What the official slim image does: deb822 sources with updates and security,
    # no docs or man pages from later installs, no package cache kept in layers.
    rm -f "$rootfs/etc/apt/sources.list"
    # Trust what the host trusts (a TLS-intercepting proxy CA, if any): any later
    # install of ca-certificates folds this into the image's bundle.
    install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$rootfs/usr/local/share/ca-certificates/host-bundle.crt"
    {
      printf 'Types: deb\nURIs: %s\nSuites: trixie trixie-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$mirror"
      [[ -z $security ]] ||
        printf '\nTypes: deb\nURIs: %s\nSuites: trixie-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$security"
    } >"$rootfs/etc/apt/sources.list.d/debian.sources"
    printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
      'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' \
      'path-exclude /usr/share/locale/*' 'path-include /usr/share/locale/locale.alias' \
      >"$rootfs/etc/dpkg/dpkg.cfg.d/docker"
    printf '%s\n' 'APT::Keep-Downloaded-Packages "false";' 'APT::Install-Recommends "false";' \
      >"$rootfs/etc/apt/apt.conf.d/docker-clean"
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
      "$rootfs"/usr/share/doc "$rootfs"/usr/share/man "$rootfs"/usr/share/info "$rootfs"/var/log/*
    tar --numeric-owner -C "$rootfs" -cf "$tarball.tmp" .
    rm -rf "$rootfs"
    mv "$tarball.tmp" "$tarball"
    return 1 # new
  fi
}

# debian:trixie-slim from the rootfs tarball.
build_base() {
  local tarball=$cache/debian-trixie-minbase.tar
  rootfs_tarball || "${docker[@]}" rmi "$base_image" "golang:$go_version-trixie" "$go_image" >/dev/null 2>&1 || true
  has_image "$base_image" && return
  log "importing $base_image"
  "${docker[@]}" import --change 'CMD ["bash"]' "$tarball" "$base_image" >/dev/null
}

# arm64v8/debian:trixie-slim (a foreign ARCH's base) from its rootfs tarball, its image
# config saying the architecture, so that builds for that platform find it locally.
# `docker load` of a one-layer image archive written here: this dockerd's import
# records the host's architecture whatever --platform says.
build_foreign_base() {
  local arch=$1 image tarball
  image=$(base_for "$arch")
  tarball=$(tarball_for "$arch")
  rootfs_tarball "$arch" || "${docker[@]}" rmi "$image" >/dev/null 2>&1 || true
  has_image "$image" && return
  log "loading $image"
  local dir diff_id
  dir=$(mktemp -d "$cache/base.XXXXXX")
  ln "$tarball" "$dir/layer.tar" 2>/dev/null || cp "$tarball" "$dir/layer.tar"
  diff_id=sha256:$(sha256sum "$dir/layer.tar" | cut -d' ' -f1)
  printf '{"architecture":"%s","variant":"v8","os":"linux","config":{"Cmd":["bash"]},"rootfs":{"type":"layers","diff_ids":["%s"]}}\n' \
    "$arch" "$diff_id" >"$dir/config.json"
  printf '[{"Config":"config.json","RepoTags":["%s"],"Layers":["layer.tar"]}]\n' "$image" >"$dir/manifest.json"
  tar -C "$dir" -cf - manifest.json config.json layer.tar | "${docker[@]}" load >/dev/null
  rm -rf "$dir"
}

# golang:<version>-trixie: the base plus the host's Go toolchain.
build_go() {
  has_image "golang:$go_version-trixie" && return
  local ctx
  ctx=$(mktemp -d "$cache/goroot.XXXXXX")
  cp -al "$(go env GOROOT)/." "$ctx" 2>/dev/null || cp -a "$(go env GOROOT)/." "$ctx"
  log "building golang:$go_version-trixie from the host's Go toolchain"
  "${docker[@]}" build -q --network host --build-arg "BASE_IMAGE=$base_image" \
    -t "golang:$go_version-trixie" -t "$go_image" -f "$here/golang/Dockerfile" "$ctx" >/dev/null
  rm -rf "$ctx"
}

# Import an image into the running cluster's containerd.
load() {
  local archive=$1
  [[ -S $containerd_sock ]] || return 0
  ctr --address "$containerd_sock" -n k8s.io images import --all-platforms "$archive" >/dev/null
}

# The tag of an image for an architecture: the image's own for the host's, unless
# several platforms are pushed; <image>-<arch> otherwise.
tag_for() {
  if [[ $2 == "$host_arch" && -z $gather ]]; then echo "$1"; else echo "$1-$2"; fi
}

build() {
  local name=$1 arch=$2 image dockerfile context
  IFS='|' read -r image dockerfile context <<<"${images[$name]}"
  local tag logs=$cache/$name
  tag=$(tag_for "$image" "$arch")
  [[ $arch == "$host_arch" ]] || logs=$cache/$name-$arch
  log "building $tag"
  local start=$SECONDS args=()
  # The demo's Prometheus is Debian's binary, as the tests run it (hack/prometheus-tools.sh);
  # SeaweedFS's weed is the one the tests run too (hack/seaweedfs.sh builds it if missing).
  [[ $name != prometheus ]] || args=(--build-arg "PROMETHEUS_DIR=$(basename "$("$repo/hack/prometheus-tools.sh")")")
  [[ $name != seaweedfs ]] || args=(--build-arg "WEED_DIR=$(basename "$(dirname "$("$repo/hack/seaweedfs.sh")")")")
  # A foreign platform: its own base for what the image ships, the host's for the
  # stages that compile on the host's platform.
  [[ $arch == "$host_arch" ]] || args+=(--platform "linux/$arch" --build-arg "BUILD_BASE_IMAGE=$base_image")
  "${docker[@]}" build --progress plain --network host "${args[@]}" \
    --build-arg "BASE_IMAGE=$(base_for "$arch")" --build-arg "GO_IMAGE=$go_image" \
    --build-arg "REDIS_IMAGE=$(tag_for "${images[redis-uring]%%|*}" "$arch")" --build-arg "GOPROXY=$(go env GOPROXY)" \
    -t "$tag" -f "$repo/$dockerfile" "$repo/$context" >"$logs.build.log" 2>&1 ||
    { tail -30 "$logs.build.log" >&2; log "build of $tag failed; see $logs.build.log"; exit 1; }
  if [[ -n $push_dir ]]; then
    "${docker[@]}" push "$tag" >"$logs.push.log" 2>&1 ||
      { tail -5 "$logs.push.log" >&2; log "push of $tag failed; see $logs.push.log"; exit 1; }
    if [[ -n $gather ]]; then
      log "$tag pushed in $((SECONDS - start))s"
      return
    fi
    # The registry's answer, not a local ID: the digest a node pulls by.
    grep -o 'digest: sha256:[0-9a-f]\{64\}' "$logs.push.log" | tail -1 | cut -d' ' -f2 >"$push_dir/$name.digest"
    [[ -s $push_dir/$name.digest ]] || { log "no digest in the push of $tag; see $logs.push.log"; exit 1; }
    log "$tag@$(cat "$push_dir/$name.digest") pushed in $((SECONDS - start))s"
    return
  fi
  if [[ $arch != "$host_arch" ]]; then
    log "$tag ready in the builder in $((SECONDS - start))s"
    return
  fi
  "${docker[@]}" save -o "$cache/$name.tar.tmp" "$image"
  mv "$cache/$name.tar.tmp" "$cache/$name.tar"
  load "$cache/$name.tar"
  log "$image ready in $((SECONDS - start))s"
}

# <image> in the registry as one OCI index of the platforms' images just pushed; its
# digest is the one a node pulls by, whatever its architecture.
push_index() {
  local name=$1 image arch manifests=()
  image=${images[$name]%%|*}
  for arch in "${arches[@]}"; do manifests+=(--manifest "$(tag_for "$image" "$arch")"); done
  if ! "$crane" index append "${manifests[@]}" --tag "$image" >"$cache/$name.index.log" 2>&1 ||
    ! "$crane" digest "$image" >"$push_dir/$name.digest" 2>>"$cache/$name.index.log"; then
    tail -5 "$cache/$name.index.log" >&2
    log "the index $image could not be pushed; see $cache/$name.index.log"
    exit 1
  fi
  log "$image@$(cat "$push_dir/$name.digest") pushed, an index of ${platforms[*]}"
}

# A foreign architecture's programs run under qemu-user; only arm64 on amd64 is set up.
emulate() {
  [[ $1 == "$host_arch" ]] && return
  [[ $1 == arm64 && $host_arch == amd64 ]] || { log "cannot build for linux/$1 on $host_arch (only linux/arm64 on amd64)"; exit 2; }
  "$repo/hack/binfmt-arm64.sh"
}

# --rootfs [ARCH]: only the tarball (the host's architecture by default), for images
# built on another daemon (e2e/kind/kind.sh).
if [[ ${1:-} == --rootfs ]]; then
  "$repo/e2e/cluster/host-deps.sh" >&2
  emulate "${2:-$host_arch}"
  mkdir -p "$cache"
  rootfs_tarball "${2:-$host_arch}" || true
  tarball_for "${2:-$host_arch}"
  exit 0
fi
push_dir=
if [[ ${1:-} == --push ]]; then
  push_dir=${2:?--push needs the directory for the digests}
  shift 2
  mkdir -p "$push_dir"
fi
names=("$@")
if ((${#names[@]} == 0)); then
  for name in "${order[@]}"; do
    IFS='|' read -r _ dockerfile _ <<<"${images[$name]}"
    [[ -f $repo/$dockerfile ]] && names+=("$name")
  done
fi
for name in "${names[@]}"; do
  [[ -n ${images[$name]:-} ]] || { log "unknown image $name (known: ${order[*]})"; exit 2; }
done
arches=()
for platform in "${platforms[@]}"; do
  [[ $platform == linux/* ]] || { log "PLATFORMS: $platform is not linux/<arch>"; exit 2; }
  arches+=("${platform#linux/}")
done
# Pushing anything but the host's platform alone: one index per image, made by crane.
gather=
if [[ -n $push_dir && ${arches[*]} != "$host_arch" ]]; then
  gather=1
  [[ -x $crane ]] || { log "pushing ${platforms[*]} needs crane at $crane (make release installs it; CRANE=path)"; exit 2; }
fi

"$repo/e2e/cluster/host-deps.sh" >&2
for arch in "${arches[@]}"; do emulate "$arch"; done
mkdir -p "$cache"
# The node's kubelet deletes images no pod uses once its disk is nearly full
# (evictionHard imagefs.available 1%), and no registry can give them back: a
# full disk would surface later as "image not found". Say so up front.
need_kib=$((8 * 1024 * 1024))
free_kib=$(df -Pk "$cache" | awk 'NR == 2 {print $4}')
if ((free_kib < need_kib)); then
  log "only $((free_kib / 1024)) MiB free on the filesystem of $cache; building and importing the images needs about $((need_kib / 1024 / 1024)) GiB (the node's kubelet deletes unused images when its disk is nearly full): free some space"
  exit 1
fi
# One build at a time: the private dockerd belongs to the script that started it.
exec 9>"$cache/build.lock"
flock 9
start_docker
[[ -n ${E2E_KEEP_BUILDER:-} ]] || trap stop_docker EXIT
build_base
build_go
for arch in "${arches[@]}"; do [[ $arch == "$host_arch" ]] || build_foreign_base "$arch"; done
for name in "${names[@]}"; do
  for arch in "${arches[@]}"; do build "$name" "$arch"; done
  [[ -z $gather ]] || push_index "$name"
done
