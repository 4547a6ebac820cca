// Placeholder: the fsdp strategy is being written (issue 3).
#include "dtsim/sim/strategy.hpp"

namespace dtsim::sim {

void register_fsdp(Registry<Strategy>&) {}

}  // namespace dtsim::sim
