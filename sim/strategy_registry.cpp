#include "dtsim/sim/strategy.hpp"

namespace dtsim::sim {

const Registry<Strategy>& strategies() {
    static const Registry<Strategy> registry = [] {
        Registry<Strategy> r("strategy");
        register_ddp(r);
        return r;
    }();
    return registry;
}

Plan lower(const models::Workload& workload, const Config& config) {
    config.validate();
    const auto& entry = strategies().find(config.strategy);
    Knobs knobs(entry.name, entry.value.knobs, config.knobs);
    return entry.value.lower(workload, config, knobs);
}

}  // namespace dtsim::sim
