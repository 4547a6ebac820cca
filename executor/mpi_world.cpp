#include "dtsim/executor/mpi_world.hpp"

#include "dtsim/common/error.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>

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

std::vector<std::pair<int, int>> communicator_keys(const sim::Plan& plan) {
    std::vector<std::pair<int, int>> keys;
    for (const auto& t : plan.tasks)
        if (t.kind == sim::TaskKind::collective) keys.emplace_back(t.stream, t.group);
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    return keys;
}

int group_color(const sim::Plan& plan, int g, const sim::Config& config, int rank) {
    const auto& group = plan.groups[static_cast<std::size_t>(g)];
    const int per_node = config.topology.gpus_per_node;
    if (group.size == config.topology.world_size()) return 0;
    if (group.nodes == 1 && per_node % group.size == 0) return rank / group.size;              // a block of one node
    if (group.per_node() == 1 && group.size == config.topology.nodes) return rank % per_node;  // same local rank
    throw ConfigError(
        fmt::format("the executor cannot form communication group {} ({} ranks over {} nodes) on {}x{} ranks", g,
                    group.size, group.nodes, config.topology.nodes, per_node));
}

}  // namespace dtsim::executor
