// NCCL communicators bootstrapped over MPI (CUDA backend): rank 0 of an MPI
// communicator creates NCCL's unique id and broadcasts it, and every rank
// joins. Compiled only with the CUDA toolkit.
#pragma once

#include <mpi.h>
#include <nccl.h>

namespace dtsim::profiler::cuda {

// This process's rank among the processes of its node (MPI_COMM_TYPE_SHARED);
// a rank drives device mpi_local_rank() % device count. Collective on
// MPI_COMM_WORLD. Throws dtsim::Error naming the failed call.
int mpi_local_rank();

// A communicator over the ranks of `comm`, in their order there, on the
// calling thread's current device. Collective on `comm`; the caller owns the
// result (ncclCommDestroy or ncclCommAbort). Throws dtsim::Error naming the
// failed call.
ncclComm_t nccl_comm_over_mpi(MPI_Comm comm);

}  // namespace dtsim::profiler::cuda
