#include "dtsim/models/model_registry.hpp"

#include "builders.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/registry.hpp"

#include <fmt/format.h>

#include <charconv>
#include <functional>
#include <optional>
#include <string_view>

namespace dtsim::models {
namespace {

constexpr std::string_view mlp_pattern = "mlp-<layers>x<width>";
constexpr std::int64_t mlp_max_layers = 100000;
constexpr std::int64_t mlp_max_width = 1000000;

struct NamedModel {
    std::int64_t max_positions = 0;  // also the default sequence length
    std::function<Workload(const std::string& name, std::int64_t micro_batch, std::int64_t seq_len, DType dtype,
                           AttentionImpl attention, Autocast autocast)>
        build;
    bool images = false;  // samples are images: no sequence dimension, seq_len must be 0 or 1
};

NamedModel gpt2(Gpt2Config c) {
    return {c.positions, [c](const std::string& name, std::int64_t b, std::int64_t s, DType dt, AttentionImpl at,
                             Autocast ac) { return build_gpt2(name, c, b, s, dt, at, ac); }};
}

NamedModel llama(LlamaConfig c) {
    return {c.positions, [c](const std::string& name, std::int64_t b, std::int64_t s, DType dt, AttentionImpl at,
                             Autocast ac) { return build_llama(name, c, b, s, dt, at, ac); }};
}

NamedModel neox(NeoxConfig c) {
    return {c.positions, [c](const std::string& name, std::int64_t b, std::int64_t s, DType dt, AttentionImpl at,
                             Autocast ac) { return build_neox(name, c, b, s, dt, at, ac); }};
}

NamedModel hf_model(const HfModel& m) {
    if (const auto* g = std::get_if<Gpt2Config>(&m.config)) return gpt2(*g);
    if (const auto* n = std::get_if<NeoxConfig>(&m.config)) return neox(*n);
    return llama(std::get<LlamaConfig>(m.config));
}

NamedModel resnet(ResNetConfig c) {
    return {1,
            [c](const std::string& name, std::int64_t b, std::int64_t, DType dt, AttentionImpl, Autocast) {
                return build_resnet(name, c, b, dt);
            },
            true};
}

const Registry<NamedModel>& registry() {
    static const Registry<NamedModel> r = [] {
        Registry<NamedModel> reg("model");
        reg.add("gpt2", "GPT-2 small: 12 layers, hidden 768, 12 heads, context 1024", gpt2({768, 12, 12, 50257, 1024}));
        reg.add("gpt2-medium", "GPT-2 medium: 24 layers, hidden 1024, 16 heads, context 1024",
                gpt2({1024, 24, 16, 50257, 1024}));
        reg.add("gpt2-large", "GPT-2 large: 36 layers, hidden 1280, 20 heads, context 1024",
                gpt2({1280, 36, 20, 50257, 1024}));
        reg.add("gpt2-xl", "GPT-2 XL: 48 layers, hidden 1600, 25 heads, context 1024",
                gpt2({1600, 48, 25, 50257, 1024}));
        reg.add("llama2-7b", "Llama-2 7B: 32 layers, hidden 4096, 32 heads, context 4096",
                llama({4096, 32, 32, 32, 11008, 32000, 4096}));
        reg.add("llama2-13b", "Llama-2 13B: 40 layers, hidden 5120, 40 heads, context 4096",
                llama({5120, 40, 40, 40, 13824, 32000, 4096}));
        // The 34B of the Llama 2 paper was never released; fms-fsdp's "34b"
        // (fms_fsdp/utils/config_utils.py), the PyTorch FSDP blog's 34B rows,
        // has Code Llama 34B's shape, here with Llama 2's context.
        reg.add(
            "llama2-34b",
            "Llama-2 34B (Code Llama 34B's shape): 48 layers, hidden 8192, 64 heads (8 KV heads, GQA), context 4096",
            llama({8192, 48, 64, 8, 22016, 32000, 4096}));
        reg.add("llama2-70b", "Llama-2 70B: 80 layers, hidden 8192, 64 heads (8 KV heads, GQA), context 4096",
                llama({8192, 80, 64, 8, 28672, 32000, 4096}));
        // Llama-3, Mistral and Qwen2 from their HuggingFace config.json files (models/hf_configs).
        for (const EmbeddedConfig& e : embedded_hf_configs()) {
            const HfModel m =
                parse_hf_config(nlohmann::json::parse(e.json), std::string("models/hf_configs/") + e.name + ".json");
            reg.add(e.name, m.description, hf_model(m));
        }
        reg.add("resnet50",
                "ResNet-50 (torchvision v1.5): Bottleneck blocks [3, 4, 6, 3], ImageNet 224x224, 1000 classes",
                resnet({{3, 4, 6, 3}, 224, 1000}));
        return reg;
    }();
    return r;
}

std::optional<std::int64_t> parse_positive(std::string_view text, std::int64_t max) {
    if (text.empty() || text.size() > 9) return std::nullopt;
    std::int64_t v = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size() || v < 1 || v > max) return std::nullopt;
    return v;
}

struct MlpShape {
    std::int64_t layers = 0;
    std::int64_t width = 0;
};

MlpShape parse_mlp_name(std::string_view name) {
    auto fail = [&]() -> MlpShape {
        throw ConfigError(
            fmt::format("malformed MLP model name '{}': expected {} with 1 <= layers <= {} and 1 <= width <= {}, "
                        "e.g. mlp-8x2048.",
                        name, mlp_pattern, mlp_max_layers, mlp_max_width));
    };
    std::string_view rest = name.substr(4);  // after "mlp-"
    const auto x = rest.find('x');
    if (x == std::string_view::npos) return fail();
    auto layers = parse_positive(rest.substr(0, x), mlp_max_layers);
    auto width = parse_positive(rest.substr(x + 1), mlp_max_width);
    if (!layers || !width) return fail();
    return {*layers, *width};
}

void check_micro_batch(const WorkloadRequest& r) {
    if (r.micro_batch < 1)
        throw ConfigError(
            fmt::format("micro_batch {} is invalid for model '{}': it must be at least 1.", r.micro_batch, r.model));
}

}  // namespace

std::string_view to_string(AttentionImpl impl) {
    switch (impl) {
        case AttentionImpl::flash: return "flash";
        case AttentionImpl::eager: return "eager";
    }
    return "unknown";
}

AttentionImpl attention_from_string(std::string_view name) {
    if (name == "flash" || name == "sdpa") return AttentionImpl::flash;
    if (name == "eager") return AttentionImpl::eager;
    throw ConfigError(unknown_name_message("attention implementation", name, {"flash", "sdpa", "eager"}));
}

bool has_sequence_dimension(const std::string& model) {
    if (model.starts_with("mlp-")) return false;
    const auto* entry = registry().find_or_null(model);
    return entry == nullptr || !entry->value.images;
}

Workload build_workload(const WorkloadRequest& request) {
    const std::string& name = request.model;
    if (name.starts_with("mlp-")) {
        const MlpShape shape = parse_mlp_name(name);
        check_micro_batch(request);
        if (request.seq_len != 0 && request.seq_len != 1)
            throw ConfigError(fmt::format(
                "seq_len {} is invalid for model '{}': an MLP has no sequence dimension, so seq_len must be 0 "
                "(the default) or 1.",
                request.seq_len, name));
        return build_mlp(name, shape.layers, shape.width, request.micro_batch, request.activation_dtype);
    }

    // A HuggingFace config.json (or its directory), else a built-in name.
    std::optional<NamedModel> from_file;
    const NamedModel* model = nullptr;
    if (is_hf_config_path(name)) {
        model = &from_file.emplace(hf_model(read_hf_config(name)));
    } else {
        const auto* entry = registry().find_or_null(name);
        if (entry == nullptr) throw ConfigError(unknown_name_message("model", name, model_names()));
        model = &entry->value;
    }
    check_micro_batch(request);
    if (model->images && request.seq_len != 0 && request.seq_len != 1)
        throw ConfigError(fmt::format(
            "seq_len {} is invalid for model '{}': its samples are images with no sequence dimension, so seq_len "
            "must be 0 (the default) or 1.",
            request.seq_len, name));
    const std::int64_t max = model->max_positions;
    if (request.seq_len < 0 || request.seq_len > max)
        throw ConfigError(
            fmt::format("seq_len {} is out of range for model '{}': it must be between 1 and its context length {} "
                        "(0 means the default, {}).",
                        request.seq_len, name, max, max));
    const std::int64_t seq_len = request.seq_len == 0 ? max : request.seq_len;
    return model->build(name, request.micro_batch, seq_len, request.activation_dtype, request.attention,
                        request.autocast);
}

std::vector<ModelInfo> list_models() {
    static const std::vector<ModelInfo> infos = [] {
        std::vector<ModelInfo> out;
        for (const auto& e : registry().entries()) {
            const Workload w = build_workload({e.name, 1, 0, DType::bf16});
            ModelInfo info;
            info.name = e.name;
            info.description = e.description;
            info.param_count = w.param_count();
            info.default_seq_len = w.seq_len;
            info.training_flops_per_token = w.model_flops() / static_cast<double>(w.seq_len);
            out.push_back(std::move(info));
        }
        ModelInfo mlp;
        mlp.name = std::string(mlp_pattern);
        mlp.description =
            "MLP family: <layers> Linear(<width>, <width>) layers with bias and ReLU, MSE loss; e.g. mlp-8x2048";
        mlp.default_seq_len = 1;
        out.push_back(std::move(mlp));
        return out;
    }();
    return infos;
}

std::vector<std::string> model_names() {
    std::vector<std::string> names = registry().names();
    names.emplace_back(mlp_pattern);
    return names;
}

}  // namespace dtsim::models
