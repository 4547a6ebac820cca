#include "dtsim/sim/fsdp_wrap.hpp"

namespace dtsim::sim {

std::string fsdp_wrap_policy(const Knobs& knobs) {
    if (knobs.text("frontend") == "lightning" && !knobs.is_set("auto_wrap_policy")) return "none";
    return knobs.text("auto_wrap_policy");
}

std::vector<int> fsdp_unit_of_layer(const models::Workload& w, const Knobs& knobs) {
    const std::string policy = fsdp_wrap_policy(knobs);
    return fsdp_unit_of_layer(w, policy, policy == "size" ? knobs.number("min_num_params") : 0);
}

std::vector<int> fsdp_unit_of_layer(const models::Workload& w, const std::string& policy, double min_num_params) {
    const std::size_t n = w.layers.size();
    std::vector<int> unit_of(n, kFsdpRootUnit);
    int next = kFsdpRootUnit + 1;
    // No policy: FullyShardedDataParallel(model) makes one unit, the root.
    if (policy == "none") return unit_of;
    if (policy == "transformer") {
        std::vector<int> unit_of_block;
        for (std::size_t l = 0; l < n; ++l) {
            const int block = w.layers[l].block;
            if (block < 0) continue;
            const auto b = static_cast<std::size_t>(block);
            if (b >= unit_of_block.size()) unit_of_block.resize(b + 1, -1);
            if (unit_of_block[b] < 0) unit_of_block[b] = next++;
            unit_of[l] = unit_of_block[b];
        }
        return unit_of;
    }
    std::size_t start = 0;
    std::int64_t sum = 0;
    for (std::size_t l = 0; l < n; ++l) {
        sum += w.layers[l].param_count();
        if (static_cast<double>(sum) < min_num_params) continue;
        for (std::size_t i = start; i <= l; ++i) unit_of[i] = next;
        ++next;
        start = l + 1;
        sum = 0;
    }
    return unit_of;
}

}  // namespace dtsim::sim
