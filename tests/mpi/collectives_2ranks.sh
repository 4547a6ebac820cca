#!/usr/bin/env bash
# Runs the hidden [mpi2] cases of the profiler test binary on 2 MPI ranks.
# Usage: collectives_2ranks.sh <path to dtsim_test_profiler>
set -euo pipefail
if [[ $# -ne 1 ]]; then
    echo "usage: $0 <dtsim_test_profiler>" >&2
    exit 2
fi
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec mpirun -np 2 --oversubscribe "$1" "[mpi2]"
