#!/usr/bin/env bash
# Runs the hidden [mpi2hooks] cases of the executor test binary on 2 MPI ranks:
# DDP's fp16/bf16 compression and PowerSGD hooks train for real within the
# error bounds README.md states.
# Usage: execute_hooks_2ranks.sh <path to dtsim_test_executor>
set -euo pipefail
if [[ $# -ne 1 ]]; then
    echo "usage: $0 <dtsim_test_executor>" >&2
    exit 2
fi
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec mpirun -np 2 --oversubscribe "$1" "[mpi2hooks]"
