#include "dtsim/profiler/mpi_init.hpp"

#include "dtsim/runtime/process_memory.hpp"

#include <mpi.h>

#include <cstdlib>

namespace dtsim::profiler {

void ensure_mpi(bool reuse_freed_memory_in_process) {
    if (reuse_freed_memory_in_process) runtime::reuse_freed_memory();
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized != 0) return;
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    std::atexit([] {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (finalized == 0) MPI_Finalize();
    });
}

}  // namespace dtsim::profiler
