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

// A kind of step the summary reports on its own: the steady state, a warm-up
// iteration, an averaging step. `weight` is its share of steps in the long run
// (0 for warm-ups, which happen once).
struct StepPhase {
    std::string label;
    std::int64_t iteration = Config::kSteadyIteration;
    double weight = 1.0;
};

struct Strategy {
    std::vector<KnobSpec> knobs;
    Plan (*lower)(const models::Workload&, const Config&, const Knobs&);
    // The phases worth reporting; empty means just the steady state.
    std::vector<StepPhase> (*phases)(const Config&, const Knobs&) = nullptr;
    // How the strategy runs the model under the mixed precisions (workload.hpp's
    // Autocast); nullptr: torch.autocast over fp32 parameters, as DDP does.
    models::Autocast (*autocast)(const Config&, const Knobs&) = nullptr;
};

// The strategy's phases for this config (at least one: the first is the headline).
std::vector<StepPhase> step_phases(const Config& config);

// All strategies, registered explicitly in strategy_registry.cpp.
const Registry<Strategy>& strategies();

// The dtypes the model's tensors take under config's strategy and precision
// (what build_workload hands the model builders).
models::Autocast workload_autocast(const Config& config);

// Looks up config.strategy, validates its knobs and lowers.
Plan lower(const models::Workload& workload, const Config& config);

// One line per registration, for strategies' register functions.
void register_ddp(Registry<Strategy>& r);
void register_fsdp(Registry<Strategy>& r);
void register_zero(Registry<Strategy>& r);

}  // namespace dtsim::sim
