#!/usr/bin/env bash
# Install the host packages needed to build and test redis-uring (idempotent).
#
# The +dfsg orig tarball still carries Valkey's bundled deps (jemalloc, lua,
# hiredis, linenoise, hdr_histogram): only two macOS-only hiredis files are
# excluded, so the build does not need the distro's liblua/libhiredis/jemalloc.
# What it does need from the host: a C toolchain, liburing (the engine), OpenSSL
# (BUILD_TLS=yes; openssl makes the upstream suite's test certificates, tcl-tls
# runs its TLS half),
# libseccomp (the launcher that denies io_uring_setup in the fallback test),
# FUSE 3 (fusedisk, the harness' disk with a volatile cache and a slow flush),
# tcl for the upstream test suite, gdb (run-tests.sh takes the stacks of a
# server left hanging), and curl for the pinned source from the pool.
set -euo pipefail

pkgs=(build-essential pkg-config liburing-dev libssl-dev openssl libseccomp-dev fuse3 libfuse3-dev tcl tcl-tls gdb xz-utils patch procps curl)
missing=()
for p in "${pkgs[@]}"; do
  # Not `dpkg-query | grep -q`: under pipefail, grep quitting early would fail
  # the pipeline with SIGPIPE and count an installed package as missing.
  grep -q 'install ok installed' <<<"$(dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null)" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
sudo_cmd=()
[[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
# Other builds may hold the dpkg lock; wait for it instead of failing.
"${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600 -q install -y --no-install-recommends "${missing[@]}"
