// Lightning strategy names as users write them (`Trainer(strategy="...")`,
// formats.md §5, strategy-semantics.md §7), mapped onto dtsim's strategies
// and knobs. The launch method is a one-off cost, reported once, never per step.
#pragma once

#include "dtsim/sim/config.hpp"

#include <optional>
#include <string>
#include <vector>

namespace dtsim::sim {

struct LightningStrategy {
    std::string name;      // "deepspeed_stage_3_offload"
    std::string strategy;  // "deepspeed"
    std::vector<std::pair<std::string, std::string>> knobs;
    std::string launch;  // how processes start, and what that costs once
};

const std::vector<LightningStrategy>& lightning_strategies();

// If config.strategy is a Lightning name, replaces it by the dtsim strategy and
// puts its knobs before the user's (so --set overrides them). Returns the
// launch description, or nothing when the name was not a Lightning name.
std::optional<std::string> resolve_lightning_name(Config& config);

}  // namespace dtsim::sim
