// NCCL communicators per (communication stream, group) (cuda_backend.hpp).
#include "cuda_backend.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/executor/mpi_world.hpp"
#include "dtsim/profiler/nccl_bootstrap.hpp"

namespace dtsim::executor::cuda {

NcclGroups::NcclGroups(const sim::Plan& plan, const sim::Config& config, int rank) {
    try {
        for (const auto& [s, g] : communicator_keys(plan)) {
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
