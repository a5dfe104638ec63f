#!/usr/bin/env bash
# Let this amd64 host run linux/arm64 programs: Debian's qemu-user-static, registered
# with the kernel's binfmt_misc. Idempotent: a no-op when qemu-aarch64 is registered.
#
#   hack/binfmt-arm64.sh
#
# The registration carries the F (fix binary) flag, so the kernel opens the
# interpreter once, here, and every arm64 program runs under it in any mount namespace:
# debootstrap's second stage in a chroot, RUN steps and containers of the private
# dockerd, none of which holds a qemu binary of its own. Nothing else is changed on
# the host (no binfmt-support or systemd-binfmt service).
set -euo pipefail

binfmt=/proc/sys/fs/binfmt_misc
if [[ -e $binfmt/qemu-aarch64 ]] && grep -qx enabled "$binfmt/qemu-aarch64"; then exit 0; fi

if ! grep -qx 'install ok installed' <<<"$(dpkg-query -W -f='${Status}\n' qemu-user-static 2>/dev/null)"; then
  echo "binfmt-arm64: installing qemu-user-static" >&2
  # Other builds may hold the dpkg lock; wait for it instead of failing.
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -qq install -y --no-install-recommends qemu-user-static
fi
[[ -e $binfmt/register ]] || mount -t binfmt_misc binfmt_misc "$binfmt"
[[ -e $binfmt/qemu-aarch64 ]] || {
  # Debian's rule for systemd-binfmt, one line: :name:type:offset:magic:mask:interpreter:flags
  rule=$(grep -h '^:qemu-aarch64:' /usr/lib/binfmt.d/qemu-aarch64.conf)
  [[ $rule == *:*F ]] || rule+=F
  echo "$rule" >"$binfmt/register"
}
echo 1 >"$binfmt/qemu-aarch64"
grep -q '^flags:.*F' "$binfmt/qemu-aarch64" ||
  { echo "binfmt-arm64: qemu-aarch64 is registered without the F flag; unregister it (echo -1 >$binfmt/qemu-aarch64) and run again" >&2; exit 1; }
echo "binfmt-arm64: $(sed -n 's/^interpreter //p' "$binfmt/qemu-aarch64") runs linux/arm64 programs" >&2
