// torch.optim's implementation choice, given as the optimizer's own arguments
// (`--set foreach=false`, `--set fused=true`) to the strategies whose step is
// torch.optim (DDP, FSDP). DeepSpeed steps with its own FusedAdam.
#pragma once

#include "dtsim/sim/knobs.hpp"
#include "dtsim/sim/plan.hpp"

#include <vector>

namespace dtsim::sim {

// The `foreach` and `fused` knob specs, appended to a strategy's own.
std::vector<KnobSpec> torch_optimizer_knobs();
// Which implementation the knobs select; fused and foreach both true is a
// ConfigError, as torch.optim raises.
OptimizerImpl torch_optimizer_impl(const Knobs& knobs);

}  // namespace dtsim::sim
