#!/usr/bin/env bash
# Runs the hidden cases of a Catch2 test binary that carry a tag, on 2 MPI ranks.
# Usage: catch_2ranks.sh <test binary> <tag, e.g. [mpi2]>
source "$(dirname "$0")/common.sh"
if [[ $# -ne 2 ]]; then
    echo "usage: $0 <test binary> <tag>" >&2
    exit 2
fi
# --warn NoTests: a filter that matches no test case fails instead of passing vacuously.
exec mpirun -np 2 --oversubscribe "$1" --warn NoTests "$2"
