#!/usr/bin/env bash
# Installs the Debian 12 packages dtsim builds with, if any are missing.
# Quiet when everything is already there. Needs root (or sudo) to install.
set -euo pipefail

# Build: compiler, CMake, the libraries the product links (zlib reads .json.gz
# traces; gloo is torch.distributed's CPU transport, for --backend gloo). Tests: python3 checks the CLI's JSON output in tests/mpi and
# tests/cli (a fresh Debian 12 minbase has no python3). GUI: qt6-base-dev
# (Qt 6 Widgets, for `dtsim gui`; the build leaves the GUI out without it) and
# a font, since a minbase has none and Qt would draw labels as nothing.
packages=(
  cmake ninja-build g++ pkg-config
  libfmt-dev nlohmann-json3-dev catch2 libcli11-dev
  libopenmpi-dev openmpi-bin libopenblas-dev zlib1g-dev libgloo-dev
  python3
  qt6-base-dev fonts-dejavu-core
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "dtsim: installing missing Debian packages: ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then
    sudo="sudo"
  else
    echo "dtsim: error: these packages are missing and I am not root: ${missing[*]}" >&2
    echo "dtsim: run as root: apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
