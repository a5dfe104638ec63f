#!/usr/bin/env bash
# Install the host packages the offline test bed needs, from the Debian release the
# host already tracks. Idempotent: a no-op (one dpkg query) when everything is there.
# With package names, only those (`make test` needs docker-registry alone).
#
# Packages only: nothing is enabled or started here. Services that Debian would start
# on install (containerd, docker, docker-registry) are kept stopped by policy-rc.d when present; the
# test bed runs private instances with their own sockets and state instead.
set -euo pipefail

packages=(
  containerd runc containernetworking-plugins # node runtime
  iptables conntrack iproute2 kmod            # kube-proxy, CNI bridge, br_netfilter
  ipset                                       # kube-router's NetworkPolicies
  openssl                                     # PKI
  e2fsprogs util-linux mount                  # ext4 volumes on loop devices
  gcc libc6-dev                               # static pause and io_uring probe
  debootstrap docker.io                       # image pipeline
  docker-registry                             # the registry the node pulls from (distribution)
  netcat-openbsd jq                           # readiness checks without busybox wget; JSON
  libcap2-bin                                 # capsh: the VM's capabilities, for kind's runtime
)

(($# == 0)) || packages=("$@")
missing=()
for p in "${packages[@]}"; do
  # Not `dpkg-query | grep -q`: under pipefail, grep quitting at the first of
  # several lines (multiarch) would fail the pipeline with SIGPIPE.
  grep -qx installed <<<"$(dpkg-query -W -f '${db:Status-Status}\n' "$p" 2>/dev/null)" || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

echo "host-deps: installing ${missing[*]}" >&2
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
export DEBIAN_FRONTEND=noninteractive
apt-get -qq update
apt-get -qq install -y --no-install-recommends "${missing[@]}"
