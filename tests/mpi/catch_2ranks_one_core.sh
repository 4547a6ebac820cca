#!/usr/bin/env bash
# Runs the hidden cases of a Catch2 test binary that carry a tag, on 2 MPI ranks
# confined to one core (taskset, no binding): ranks that share cores.
# Usage: catch_2ranks_one_core.sh <test binary> <tag>
source "$(dirname "$0")/common.sh"
if [[ $# -ne 2 ]]; then
    echo "usage: $0 <test binary> <tag>" >&2
    exit 2
fi
exec taskset -c 0 mpirun -np 2 --oversubscribe --bind-to none "$1" "$2"
