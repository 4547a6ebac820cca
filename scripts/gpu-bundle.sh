#!/usr/bin/env bash
# Pack what the CUDA checks need to run on a GPU machine that has the CUDA
# toolkit but not this project's Debian packages (the lent device machines are
# an Ubuntu image with CUDA 13 and PyTorch, and nothing can be installed there).
#
#   scripts/gpu-bundle.sh [BUILD_DIR] [OUT_DIR]
#
# BUILD_DIR (default build/ci) must hold cli/dtsim and the two test binaries
# that carry the CUDA cases, built with the CUDA backend. Build it without the
# GUI, so that Qt does not travel:
#   cmake -S . -B build/ci -DCMAKE_DISABLE_FIND_PACKAGE_Qt6=ON && ninja -C build/ci dtsim dtsim_test_profiler dtsim_test_executor
#
# OUT_DIR (default .devbundle, which .git/info/exclude should ignore) receives
# the three binaries and debroot.tar.gz: every file of the Debian packages they
# need beyond glibc, libstdc++ and CUDA (Open MPI with its plugins and mpirun,
# PMIx, hwloc, libevent, fmt, OpenBLAS, gloo and what it links). bench/cuda/run-on-gpu.sh unpacks it
# with --skip-old-files, so a library the machine already has is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/ci}
out=${2:-.devbundle}

for b in cli/dtsim tests/dtsim_test_profiler tests/dtsim_test_executor; do
    [[ -x $build/$b ]] || { echo "gpu-bundle.sh: $build/$b is missing; build it first (see this script's header)" >&2; exit 1; }
done
if ldd "$build/cli/dtsim" | grep -q libQt6; then
    echo "gpu-bundle.sh: $build/cli/dtsim links Qt; reconfigure with -DCMAKE_DISABLE_FIND_PACKAGE_Qt6=ON so Qt does not travel" >&2
    exit 1
fi
if ! ldd "$build/cli/dtsim" | grep -q libcudart; then
    echo "gpu-bundle.sh: $build/cli/dtsim has no CUDA backend (libcudart not linked)" >&2
    exit 1
fi

packages=(libopenmpi3 openmpi-bin openmpi-common libpmix2 libhwloc15 libevent-core-2.1-7
          libevent-pthreads-2.1-7 libmunge2 libfmt9 libopenblas0-pthread libgfortran5 libquadmath0
          libgloo0 libhiredis0.14 libibverbs1 libnl-3-200 libnl-route-3-200)
mkdir -p "$out"
list=$(mktemp)
trap 'rm -f "$list"' EXIT
for p in "${packages[@]}"; do
    dpkg -L "$p" | while read -r f; do
        [[ -f $f || -L $f ]] || continue
        case $f in /usr/share/doc/*|/usr/share/man/*|/usr/share/lintian/*) continue ;; esac
        echo "${f#/}"
    done
done | sort -u >"$list"
# Debian reaches mpirun and OpenBLAS through alternatives links that no package lists.
tar -C / -czf "$out/debroot.tar.gz" -T "$list"
for b in cli/dtsim tests/dtsim_test_profiler tests/dtsim_test_executor; do
    cp "$build/$b" "$out/"
    strip "$out/$(basename "$b")"
done
echo "gpu-bundle.sh: $(wc -l <"$list") files from ${#packages[@]} packages; $(du -sh "$out" | cut -f1) in $out"
