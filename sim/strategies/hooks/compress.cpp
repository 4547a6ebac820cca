// Placeholder: fp16/bf16 compression hooks (issue 3).
#include "dtsim/sim/comm_hook.hpp"

namespace dtsim::sim {

void register_compress_hooks(Registry<CommHook>&) {}

}  // namespace dtsim::sim
