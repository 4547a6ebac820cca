#!/usr/bin/env bash
# Runs the hidden [mpi2sharded] cases of the executor test binary on 2 MPI
# ranks: FSDP and DeepSpeed ZeRO 1/2/3 training on 2 ranks equals one process
# on the global batch, with identical parameters on both ranks.
# Usage: execute_sharded_2ranks.sh <path to dtsim_test_executor>
set -euo pipefail
if [[ $# -ne 1 ]]; then
    echo "usage: $0 <dtsim_test_executor>" >&2
    exit 2
fi
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec mpirun -np 2 --oversubscribe "$1" "[mpi2sharded]"
