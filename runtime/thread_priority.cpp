#include "dtsim/runtime/thread_priority.hpp"

#include <sys/resource.h>
#include <unistd.h>

namespace dtsim::runtime {

bool lower_this_thread_priority() {
    // PRIO_PROCESS with a thread id sets that thread's nice value alone (Linux).
    return setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19) == 0;
}

}  // namespace dtsim::runtime
