// The MPI launch an execution runs in, checked against the config before any
// work (MPI initialised, with MPI_THREAD_MULTIPLE where several threads call
// it, and as many ranks as the topology describes), and the communicators a
// Plan needs from it. Shared by both backends.
#pragma once

#include "dtsim/sim/config.hpp"
#include "dtsim/sim/plan.hpp"

#include <utility>
#include <vector>

namespace dtsim::executor {

struct MpiWorld {
    int rank = 0;
    int size = 1;
};

// Throws Error (MPI not ready) or ConfigError (rank count) with what to do.
MpiWorld checked_mpi_world(const sim::Config& config, bool needs_thread_multiple);

// The (stream, group) pairs the Plan's collectives use, sorted: one
// communicator each (concurrent collectives from different streams must not
// share one). The Plan is the same on every rank, so every rank forms them in
// this order.
std::vector<std::pair<int, int>> communicator_keys(const sim::Plan& plan);

// The MPI_Comm_split colour that puts `rank` with the other ranks of the
// Plan's communication group `group`: the world, a block of one node, or one
// rank per node. ConfigError for any other shape.
int group_color(const sim::Plan& plan, int group, const sim::Config& config, int rank);

}  // namespace dtsim::executor
