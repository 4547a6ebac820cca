#include "dtsim/profiler/process_memory.hpp"

#include <malloc.h>

namespace dtsim::profiler {

void reuse_freed_memory() {
    mallopt(M_ARENA_MAX, 1);
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace dtsim::profiler
