// The MPI launch an execution runs in, checked against the config before any
// work: MPI initialised (with MPI_THREAD_MULTIPLE where several threads call
// it) and as many ranks as the topology describes. Shared by both backends.
#pragma once

#include "dtsim/sim/config.hpp"

namespace dtsim::executor {

struct MpiWorld {
    int rank = 0;
    int size = 1;
};

// Throws Error (MPI not ready) or ConfigError (rank count) with what to do.
MpiWorld checked_mpi_world(const sim::Config& config, bool needs_thread_multiple);

}  // namespace dtsim::executor
