// Placeholder: PowerSGD hooks (issue 3).
#include "dtsim/sim/comm_hook.hpp"

namespace dtsim::sim {

void register_powersgd_hooks(Registry<CommHook>&) {}

}  // namespace dtsim::sim
