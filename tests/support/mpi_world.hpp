// Test support: MPI started (profiler::ensure_mpi), the size of its world, and
// whether the ranks agree on a value.
#pragma once

#include "dtsim/profiler/mpi_init.hpp"

#include <mpi.h>

namespace dtsim::test {

inline int mpi_world_size() {
    profiler::ensure_mpi();
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

// Every rank holds the same value of x. Collective over MPI_COMM_WORLD.
inline bool same_on_all_ranks(double x) {
    double lo = 0, hi = 0;
    MPI_Allreduce(&x, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&x, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

}  // namespace dtsim::test
