#include "dtsim/runtime/process_memory.hpp"

#include "dtsim/common/host_memory.hpp"

#include <malloc.h>

namespace dtsim::runtime {

void reuse_freed_memory() {
    keep_freed_memory();
    mallopt(M_ARENA_MAX, 1);
    mallopt(M_MMAP_MAX, 0);
}

}  // namespace dtsim::runtime
