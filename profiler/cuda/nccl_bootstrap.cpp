// NCCL bootstrap over MPI (nccl_bootstrap.hpp).
#include "dtsim/profiler/nccl_bootstrap.hpp"

#include "dtsim/common/error.hpp"

#include <fmt/format.h>

#include <cstring>

namespace dtsim::profiler::cuda {
namespace {

void check_mpi(int r, const char* what) {
    if (r != MPI_SUCCESS) throw Error(fmt::format("{} failed (MPI error {})", what, r));
}

}  // namespace

int mpi_local_rank() {
    int rank = 0;
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    MPI_Comm local = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local),
              "MPI_Comm_split_type");
    int local_rank = 0;
    const int r = MPI_Comm_rank(local, &local_rank);
    MPI_Comm_free(&local);
    check_mpi(r, "MPI_Comm_rank");
    return local_rank;
}

ncclComm_t nccl_comm_over_mpi(MPI_Comm comm) {
    int rank = 0, size = 1;
    check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    // Every rank reaches the broadcast, even when rank 0 fails, so that none waits forever.
    ncclResult_t made = ncclSuccess;
    if (rank == 0) made = ncclGetUniqueId(&id);
    int ok = made == ncclSuccess ? 1 : 0;
    check_mpi(MPI_Bcast(&ok, 1, MPI_INT, 0, comm), "MPI_Bcast");
    if (made != ncclSuccess) throw Error(fmt::format("ncclGetUniqueId failed: {}", ncclGetErrorString(made)));
    if (ok == 0) throw Error("ncclGetUniqueId failed on the group's first rank; see its error");
    check_mpi(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm), "MPI_Bcast");
    ncclComm_t out = nullptr;
    const ncclResult_t r = ncclCommInitRank(&out, size, id, rank);
    if (r != ncclSuccess)
        throw Error(fmt::format("ncclCommInitRank({} ranks, rank {}) failed: {}", size, rank, ncclGetErrorString(r)));
    return out;
}

}  // namespace dtsim::profiler::cuda
