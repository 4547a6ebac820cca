#!/usr/bin/env bash
# The README's two commands on a pristine Debian 12 (minbase), as a new user
# would run them: no python3, no git, no compiler, nothing installed by hand.
#
#   scripts/fresh-machine-test.sh [--build-dir DIR]
#
# 1. debootstrap makes a bookworm minbase root (the download is cached as a
#    tarball: DIR/fresh/bookworm-minbase.tgz, DIR defaults to build/);
# 2. the committed HEAD is cloned into it (uncommitted changes are not tested);
# 3. inside it, as root: `./dtsim demo`, then `scripts/test.sh`.
#
# Needs root, debootstrap (installed when missing) and the right to mount.
# Where debootstrap cannot run here it prints why and exits 77 (skipped);
# .ci/run reports that. Any other non-zero exit is a failure of the commands.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="$root/build"
if [ "${1:-}" = "--build-dir" ]; then build_dir="$2"; shift 2; fi
[ $# -eq 0 ] || { echo "usage: scripts/fresh-machine-test.sh [--build-dir DIR]" >&2; exit 2; }

skip() { echo "fresh-machine-test: SKIPPED: $*" >&2; exit 77; }
say() { echo "fresh-machine-test: $*" >&2; }

# Removes a root safely: first unmounts whatever debootstrap (or an interrupted
# run) left mounted in it, deepest first, and never crosses into a mount.
remove_root() {
  [ -e "$1" ] || return 0
  local m
  for m in $(awk -v r="$(realpath "$1")/" 'index($5, r) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
    umount -l "$m" || true
  done
  rm -rf --one-file-system "$1"
}

[ "$(id -u)" -eq 0 ] || skip "debootstrap and chroot need root (running as $(id -un))"
if ! command -v debootstrap >/dev/null; then
  say "installing debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2 ||
    { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2; } ||
    skip "debootstrap is not installed and apt-get could not install it"
fi
unshare --mount true 2>/dev/null || skip "cannot create a mount namespace here (unshare --mount failed)"
command -v git >/dev/null || skip "git is needed on the host to clone the repository"

work="$build_dir/fresh"
tarball="$work/bookworm-minbase.tgz"
rootfs="$work/root"
mirror="${DTSIM_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
mkdir -p "$work"

if [ ! -s "$tarball" ]; then
  say "downloading a Debian 12 minbase into $tarball (once; a few minutes)"
  remove_root "$work/tarball-work"
  debootstrap --variant=minbase --make-tarball="$tarball.part" bookworm "$work/tarball-work" "$mirror" >&2 ||
    skip "debootstrap could not download bookworm from $mirror"
  mv "$tarball.part" "$tarball"
  remove_root "$work/tarball-work"
fi

say "unpacking a pristine root in $rootfs"
remove_root "$rootfs"
debootstrap --variant=minbase --unpack-tarball="$tarball" bookworm "$rootfs" "$mirror" >&2

say "cloning $(git -C "$root" rev-parse --short HEAD) into the root"
git clone --quiet --no-hardlinks "$root" "$rootfs/root/dtsim"
# The README points at ../shared/docs; give the clone its neighbour when we have one.
if [ -d "$root/../shared" ]; then cp -r "$root/../shared" "$rootfs/root/shared"; fi
cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
# apt in the root uses the same mirror debootstrap used.
echo "deb $mirror bookworm main" > "$rootfs/etc/apt/sources.list"

# Only what a fresh login has, plus the variables this machine needs for
# OpenBLAS (see the README); nothing from the host's installs leaks in.
envs=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 TERM=dumb)
for v in OPENBLAS_CORETYPE OPENBLAS_L2_SIZE; do
  [ -n "${!v:-}" ] && envs+=("$v=${!v}")
done

# A private mount namespace: the mounts vanish with it, even if a command dies.
run_in_root() {
  unshare --mount --propagation private bash -c '
    set -e
    r="$1"; shift
    mount -t proc proc "$r/proc"
    mount --rbind /sys "$r/sys"
    mount --rbind /dev "$r/dev"
    mount -t tmpfs -o size=4g tmpfs "$r/dev/shm"
    mount -t tmpfs tmpfs "$r/tmp"
    exec chroot "$r" /usr/bin/env -i "$@"
  ' run_in_root "$rootfs" "${envs[@]}" "$@"
}

status=0
say "in the fresh root: ./dtsim demo"
start=$SECONDS
run_in_root /bin/bash -c 'cd /root/dtsim && ./dtsim demo' || status=$?
say "./dtsim demo: exit $status after $((SECONDS - start)) s"
if [ $status -eq 0 ]; then
  start=$SECONDS
  say "in the fresh root: scripts/test.sh"
  run_in_root /bin/bash -c 'cd /root/dtsim && scripts/test.sh' || status=$?
  say "scripts/test.sh: exit $status after $((SECONDS - start)) s"
fi
if [ $status -eq 0 ]; then
  say "PASSED: both README commands work on a fresh Debian 12"
  remove_root "$rootfs"
else
  say "FAILED (exit $status); the root is kept in $rootfs for inspection"
fi
exit $status
