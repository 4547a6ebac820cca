#include "dtsim/executor/mpi_world.hpp"

#include "dtsim/common/error.hpp"

#include <fmt/format.h>
#include <mpi.h>

namespace dtsim::executor {

MpiWorld checked_mpi_world(const sim::Config& config, bool needs_thread_multiple) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized == 0)
        throw Error("the executor needs MPI: call dtsim::executor::ensure_mpi() or MPI_Init_thread first.");
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    if (needs_thread_multiple && provided != MPI_THREAD_MULTIPLE)
        throw Error(
            "the executor runs collectives from several threads and needs MPI_THREAD_MULTIPLE; initialise MPI "
            "with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...).");
    MpiWorld w;
    MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w.size);
    if (w.size != config.topology.world_size())
        throw ConfigError(fmt::format(
            "the config describes {} ranks ({} nodes x {} per node) but MPI_COMM_WORLD has {}; run with mpirun -np "
            "{} or change the topology.",
            config.topology.world_size(), config.topology.nodes, config.topology.gpus_per_node, w.size,
            config.topology.world_size()));
    return w;
}

}  // namespace dtsim::executor
