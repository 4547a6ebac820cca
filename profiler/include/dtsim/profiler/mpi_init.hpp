// MPI for the commands and tests that need it: initialised once with
// MPI_THREAD_MULTIPLE (a singleton when not started by mpirun) and finalised
// at exit. Open MPI refuses to run as root without OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM),
// which are set unless the caller set them. Also sets the CPU backend's
// memory policy (process_memory.hpp).
#pragma once

namespace dtsim::profiler {

// `reuse_freed_memory_in_process`: set dtsim's malloc policy
// (process_memory.hpp: freed memory stays in the process) first; false keeps
// glibc's defaults, as torch runs (execute --allocator torch).
void ensure_mpi(bool reuse_freed_memory_in_process = true);

}  // namespace dtsim::profiler
