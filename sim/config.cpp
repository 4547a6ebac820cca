#include "dtsim/sim/config.hpp"

#include "dtsim/sim/nccl_model.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/registry.hpp"

#include <fmt/format.h>

namespace dtsim::sim {

std::string_view to_string(Precision p) {
    switch (p) {
        case Precision::fp32: return "fp32";
        case Precision::fp16_mixed: return "fp16-mixed";
        case Precision::bf16_mixed: return "bf16-mixed";
        case Precision::fp16_true: return "fp16-true";
        case Precision::bf16_true: return "bf16-true";
    }
    return "?";
}

std::string_view lightning_name(Precision p) {
    switch (p) {
        case Precision::fp32: return "32-true";
        case Precision::fp16_mixed: return "16-mixed";
        case Precision::bf16_mixed: return "bf16-mixed";
        case Precision::fp16_true: return "16-true";
        case Precision::bf16_true: return "bf16-true";
    }
    return "?";
}

Precision precision_from_string(std::string_view s) {
    constexpr Precision all[] = {Precision::fp32, Precision::fp16_mixed, Precision::bf16_mixed, Precision::fp16_true,
                                 Precision::bf16_true};
    for (auto p : all)
        if (to_string(p) == s || lightning_name(p) == s) return p;
    // Lightning's older spellings, which it maps to these.
    if (s == "32") return Precision::fp32;
    if (s == "16") return Precision::fp16_mixed;
    if (s == "bf16") return Precision::bf16_mixed;
    if (s == "64-true" || s == "64" || s == "fp64")
        throw ConfigError(fmt::format(
            "precision '{}': Lightning's 64-true trains in fp64, which no GPU preset or calibration prices (fp64 "
            "GEMMs run at a fraction of the tensor-core rate) and Lightning refuses with FSDPStrategy and "
            "DeepSpeedStrategy; use 32-true for full precision",
            s));
    throw ConfigError(
        unknown_name_message("precision", s, {"fp32", "fp16-mixed", "bf16-mixed", "fp16-true", "bf16-true"}) +
        " (Lightning's 32-true, 16-mixed, bf16-mixed, 16-true and bf16-true are accepted too)");
}

DType compute_dtype(Precision p) {
    switch (p) {
        case Precision::fp32: return DType::fp32;
        case Precision::fp16_mixed:
        case Precision::fp16_true: return DType::fp16;
        case Precision::bf16_mixed:
        case Precision::bf16_true: return DType::bf16;
    }
    return DType::fp32;
}

bool autocast(Precision p) {
    return p == Precision::fp16_mixed || p == Precision::bf16_mixed;
}

DType parameter_dtype(Precision p) {
    return autocast(p) ? DType::fp32 : compute_dtype(p);
}

std::string_view to_string(OptimizerKind o) {
    return o == OptimizerKind::adam ? "adam" : "sgd";
}

std::string_view optimizer_name(const Config& config) {
    return config.optimizer == OptimizerKind::adam && config.decoupled_weight_decay ? "adamw"
                                                                                    : to_string(config.optimizer);
}

OptimizerKind optimizer_from_string(std::string_view s) {
    if (s == "adam" || s == "adamw") return OptimizerKind::adam;
    if (s == "sgd") return OptimizerKind::sgd;
    throw ConfigError(unknown_name_message("optimizer", s, {"adam", "adamw", "sgd"}));
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
    if (ac_op && !activation_checkpointing)
        throw ConfigError(
            "--ac-op chooses what activation checkpointing saves inside each block; add "
            "--activation-checkpointing");
    if (ac_op && ac_freq > 1)
        throw ConfigError(
            fmt::format("--ac-op and --ac-freq {} are two kinds of selective AC (torchtitan's "
                        "selective_ac_option is \"op\" or a block frequency): give one",
                        ac_freq));
    parse_nccl_env(env);  // throws on a variable or value NCCL would not take
}

}  // namespace dtsim::sim
