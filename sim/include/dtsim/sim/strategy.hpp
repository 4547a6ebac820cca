// The strategy registry: each strategy is one file under sim/strategies/ that
// turns (Workload, Config, knobs) into a Plan. lower() is the only place that
// knows a strategy.
#pragma once

#include "dtsim/common/registry.hpp"
#include "dtsim/models/workload.hpp"
#include "dtsim/sim/config.hpp"
#include "dtsim/sim/knobs.hpp"
#include "dtsim/sim/plan.hpp"

#include <vector>

namespace dtsim::sim {

struct Strategy {
    std::vector<KnobSpec> knobs;
    Plan (*lower)(const models::Workload&, const Config&, const Knobs&);
};

// All strategies, registered explicitly in strategy_registry.cpp.
const Registry<Strategy>& strategies();

// Looks up config.strategy, validates its knobs and lowers.
Plan lower(const models::Workload& workload, const Config& config);

// One line per registration, for strategies' register functions.
void register_ddp(Registry<Strategy>& r);

}  // namespace dtsim::sim
