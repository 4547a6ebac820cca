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
    // Lightning's Trainer(precision=...) spellings with the same meaning.
    if (s == "32-true") return Precision::fp32;
    if (s == "16-mixed") return Precision::fp16_mixed;
    // Lightning's "true" precisions convert the model itself (no fp32 master
    // weights, optimizer state in the low precision): a different memory model.
    if (s == "bf16-true" || s == "16-true" || s == "64-true")
        throw ConfigError(fmt::format("precision '{}': Lightning's {} precision runs the whole model and its "
                                      "optimizer state in {} with no fp32 master weights, which dtsim does not model "
                                      "yet; use fp32, fp16-mixed or bf16-mixed (Lightning's 32-true, 16-mixed, "
                                      "bf16-mixed)",
                                      s, s, s == "64-true" ? "fp64" : s == "16-true" ? "fp16" : "bf16"));
    throw ConfigError(unknown_name_message("precision", s, {"fp32", "fp16-mixed", "bf16-mixed"}) +
                      " (Lightning's 32-true, 16-mixed and bf16-mixed are accepted too)");
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

namespace {

// One field's range, with the reason for its upper bound in the message.
void check_range(std::string_view field, std::int64_t value, std::int64_t max, std::string_view why_max) {
    if (value < 1) throw ConfigError(fmt::format("{} must be >= 1 (got {})", field, value));
    if (value > max) throw ConfigError(fmt::format("{} must be <= {} ({}; got {})", field, max, why_max, value));
}

}  // namespace

void Config::validate() const {
    check_range("--nodes", topology.nodes, kMaxWorldSize, "more GPUs than any cluster built");
    check_range("--gpus-per-node", topology.gpus_per_node, kMaxGpusPerNode,
                "the largest NVLink domain, NVL576, has 576 GPUs");
    const std::int64_t world = std::int64_t{topology.nodes} * topology.gpus_per_node;
    if (world > kMaxWorldSize)
        throw ConfigError(fmt::format("--nodes x --gpus-per-node must be <= {} (more GPUs than any cluster built, "
                                      "the largest have about 100,000; got {} x {} = {})",
                                      kMaxWorldSize, topology.nodes, topology.gpus_per_node, world));
    check_range("--micro-batch", micro_batch, kMaxMicroBatch, "a larger micro-batch fits in no device's memory");
    // 0 is the internal "the model's context length"; a user never gives it.
    if (seq_len != 0) check_range("--seq-len", seq_len, kMaxSeqLen, "longer than any model's context");
    check_range("--grad-accum", grad_accum, kMaxGradAccum, "more micro-steps than any training step runs");
    check_range("--ac-freq", ac_freq, kMaxAcFreq, "more blocks than any model has");
    if (ac_freq > 1 && !activation_checkpointing)
        throw ConfigError(fmt::format(
            "--ac-freq {} selects which blocks activation checkpointing recomputes; add --activation-checkpointing",
            ac_freq));
}

}  // namespace dtsim::sim
