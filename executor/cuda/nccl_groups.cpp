// NCCL communicators per (communication stream, group) (cuda_backend.hpp).
#include "cuda_backend.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/profiler/nccl_bootstrap.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace dtsim::executor::cuda {
namespace {

// The same ranks the CPU backend's Comms puts in one MPI communicator
// (executor/execute.cpp): the world, a block of one node, or one rank per node.
int group_color(const sim::Plan& plan, int g, const sim::Config& config, int rank) {
    const auto& group = plan.groups[static_cast<std::size_t>(g)];
    const int per_node = config.topology.gpus_per_node;
    if (group.size == config.topology.world_size()) return 0;
    if (group.nodes == 1 && per_node % group.size == 0) return rank / group.size;
    if (group.per_node() == 1 && group.size == config.topology.nodes) return rank % per_node;
    throw ConfigError(
        fmt::format("the executor cannot form communication group {} ({} ranks over {} nodes) on {}x{} ranks", g,
                    group.size, group.nodes, config.topology.nodes, per_node));
}

}  // namespace

NcclGroups::NcclGroups(const sim::Plan& plan, const sim::Config& config, int rank) {
    // The Plan is the same on every rank, so every rank forms the same pairs in order.
    std::vector<std::pair<int, int>> used;
    for (const auto& t : plan.tasks)
        if (t.kind == sim::TaskKind::collective) used.emplace_back(t.stream, t.group);
    std::sort(used.begin(), used.end());
    used.erase(std::unique(used.begin(), used.end()), used.end());
    try {
        for (const auto& [s, g] : used) {
            MPI_Comm sub = MPI_COMM_NULL;
            if (MPI_Comm_split(MPI_COMM_WORLD, group_color(plan, g, config, rank), rank, &sub) != MPI_SUCCESS)
                throw Error("MPI_Comm_split failed while forming the NCCL groups");
            try {
                comms_[{s, g}] = profiler::cuda::nccl_comm_over_mpi(sub);
            } catch (...) {
                MPI_Comm_free(&sub);
                throw;
            }
            MPI_Comm_free(&sub);
        }
    } catch (...) {
        abort();
        throw;
    }
}

NcclGroups::~NcclGroups() {
    if (aborted_) return;
    for (auto& [key, c] : comms_) ncclCommDestroy(c);
}

void NcclGroups::abort() {
    if (aborted_) return;
    aborted_ = true;
    for (auto& [key, c] : comms_) ncclCommAbort(c);
}

ncclComm_t NcclGroups::get(int stream, int group) const {
    auto it = comms_.find({stream, group});
    return it == comms_.end() ? nullptr : it->second;
}

}  // namespace dtsim::executor::cuda
