// Test support: MPI started (profiler::ensure_mpi) and the size of its world.
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

}  // namespace dtsim::test
