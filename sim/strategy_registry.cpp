#include "dtsim/sim/strategy.hpp"

namespace dtsim::sim {

const Registry<Strategy>& strategies() {
    static const Registry<Strategy> registry = [] {
        Registry<Strategy> r("strategy");
        register_ddp(r);
        register_fsdp(r);
        register_zero(r);
        return r;
    }();
    return registry;
}

std::vector<StepPhase> step_phases(const Config& config) {
    const auto& entry = strategies().find(config.strategy);
    Knobs knobs(entry.name, entry.value.knobs, config.knobs);
    std::vector<StepPhase> phases;
    if (entry.value.phases) phases = entry.value.phases(config, knobs);
    if (phases.empty()) phases.push_back({"steady state", Config::kSteadyIteration, 1.0});
    return phases;
}

models::Autocast workload_autocast(const Config& config) {
    if (!autocast(config.precision)) return models::Autocast::none;
    const auto& entry = strategies().find(config.strategy);
    if (!entry.value.autocast) return models::Autocast::fp32_weights;
    Knobs knobs(entry.name, entry.value.knobs, config.knobs);
    return entry.value.autocast(config, knobs);
}

Plan lower(const models::Workload& workload, const Config& config) {
    config.validate();
    const auto& entry = strategies().find(config.strategy);
    Knobs knobs(entry.name, entry.value.knobs, config.knobs);
    Plan plan = entry.value.lower(workload, config, knobs);
    plan.fresh_gradient_pages = !config.host_memory_reuse;
    return plan;
}

}  // namespace dtsim::sim
