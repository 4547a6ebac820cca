// Built-in models by the names users know: mlp-<layers>x<width>, gpt2*, llama2-*.
#pragma once

#include "dtsim/models/workload.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::models {

// AttentionImpl (declared in workload.hpp): "flash" / "eager".
std::string_view to_string(AttentionImpl impl);
// "flash", "sdpa" (HuggingFace's name for the fused path; same as flash) or
// "eager"; anything else is a ConfigError that lists the valid names.
AttentionImpl attention_from_string(std::string_view name);

struct WorkloadRequest {
    std::string model;
    std::int64_t micro_batch = 1;
    std::int64_t seq_len = 0;  // 0: the model's default (its context length; 1 for MLPs)
    DType activation_dtype = DType::fp32;
    AttentionImpl attention = AttentionImpl::flash;  // GPT-2 and Llama; MLPs ignore it
    Autocast autocast = Autocast::none;              // GPT-2 and Llama; the others ignore it
};

struct ModelInfo {
    std::string name;
    std::string description;
    std::int64_t param_count = 0;
    std::int64_t default_seq_len = 1;
    double training_flops_per_token = 0;  // forward + backward at the default sequence length
};

// Builds the workload; an unknown model is a ConfigError that lists the valid names.
Workload build_workload(const WorkloadRequest& request);

// False for MLPs and image models, whose seq_len must be 0 or 1; true for
// the sequence models and for names it does not know (build_workload says why).
bool has_sequence_dimension(const std::string& model);

// The listed models, plus a line for the mlp-<layers>x<width> family.
std::vector<ModelInfo> list_models();
// The names list_models() lists, in the same order (the MLP family as its pattern).
std::vector<std::string> model_names();

}  // namespace dtsim::models
