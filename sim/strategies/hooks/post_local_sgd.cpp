// Placeholder: post-local SGD hook (issue 3).
#include "dtsim/sim/comm_hook.hpp"

namespace dtsim::sim {

void register_post_local_sgd_hook(Registry<CommHook>&) {}

}  // namespace dtsim::sim
