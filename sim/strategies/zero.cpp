// Placeholder: the zero strategy is being written (issue 3).
#include "dtsim/sim/strategy.hpp"

namespace dtsim::sim {

void register_zero(Registry<Strategy>&) {}

}  // namespace dtsim::sim
