#include "dtsim/sim/config.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/registry.hpp"

#include <fmt/format.h>

namespace dtsim::sim {

std::string_view to_string(Precision p) {
    switch (p) {
        case Precision::fp32: return "fp32";
        case Precision::fp16_mixed: return "fp16-mixed";
        case Precision::bf16_mixed: return "bf16-mixed";
    }
    return "?";
}

Precision precision_from_string(std::string_view s) {
    for (auto p : {Precision::fp32, Precision::fp16_mixed, Precision::bf16_mixed})
        if (to_string(p) == s) return p;
    throw ConfigError(unknown_name_message("precision", s, {"fp32", "fp16-mixed", "bf16-mixed"}));
}

DType compute_dtype(Precision p) {
    switch (p) {
        case Precision::fp32: return DType::fp32;
        case Precision::fp16_mixed: return DType::fp16;
        case Precision::bf16_mixed: return DType::bf16;
    }
    return DType::fp32;
}

std::string_view to_string(OptimizerKind o) {
    return o == OptimizerKind::adam ? "adam" : "sgd";
}

OptimizerKind optimizer_from_string(std::string_view s) {
    if (s == "adam" || s == "adamw") return OptimizerKind::adam;
    if (s == "sgd") return OptimizerKind::sgd;
    throw ConfigError(unknown_name_message("optimizer", s, {"adam", "sgd"}));
}

void Config::validate() const {
    if (topology.nodes < 1) throw ConfigError(fmt::format("--nodes must be >= 1 (got {})", topology.nodes));
    if (topology.gpus_per_node < 1)
        throw ConfigError(fmt::format("--gpus-per-node must be >= 1 (got {})", topology.gpus_per_node));
    if (micro_batch < 1) throw ConfigError(fmt::format("--micro-batch must be >= 1 (got {})", micro_batch));
    if (seq_len < 0) throw ConfigError(fmt::format("--seq-len must be >= 1 (got {})", seq_len));
    if (grad_accum < 1) throw ConfigError(fmt::format("--grad-accum must be >= 1 (got {})", grad_accum));
}

}  // namespace dtsim::sim
