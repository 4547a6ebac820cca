// HuggingFace config.json (formats.md §7) to a builder's config: GPT-2; the
// Llama family that shares LlamaForCausalLM's layout (llama, mistral, qwen2,
// gemma, gemma2, phi3, and the mixtures of experts mixtral and qwen2_moe);
// and GPT-NeoX and Falcon. Every error names the file and the field.
#include "builders.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/json_io.hpp"

#include <fmt/format.h>

#include <filesystem>

namespace dtsim::models {
namespace {

// A field that may be absent or null, as HuggingFace writes defaults.
bool present(const JsonView& j, const std::string& key) { return j.has(key) && !j.value().at(key).is_null(); }

std::int64_t positive(const JsonView& j, const std::string& key, std::int64_t max) {
    return j.integer_within(
        key, Bounds{.min = 1, .min_exclusive = false, .max = static_cast<double>(max), .why_max = "larger than any "
                                                                                                  "published model"});
}

std::int64_t positive_or(const JsonView& j, const std::string& key, std::int64_t fallback, std::int64_t max) {
    return present(j, key) ? positive(j, key, max) : fallback;
}

constexpr const char* kModelTypes =
    "gpt2, gpt_neox, falcon, llama, mistral, qwen2, gemma, gemma2, phi3, mixtral or qwen2_moe";
constexpr std::int64_t kMaxWidth = 1 << 20;
constexpr std::int64_t kMaxLayers = 10000;
constexpr std::int64_t kMaxVocab = std::int64_t{1} << 24;
constexpr std::int64_t kMaxPositions = std::int64_t{1} << 24;

HfModel gpt2_config(const JsonView& j) {
    // The attribute_map's aliases: n_embd is hidden_size, and so on.
    const auto alias = [&](const std::string& name, const std::string& hf) { return present(j, name) ? name : hf; };
    Gpt2Config c;
    c.hidden = positive(j, alias("n_embd", "hidden_size"), kMaxWidth);
    c.layers = positive(j, alias("n_layer", "num_hidden_layers"), kMaxLayers);
    c.heads = positive(j, alias("n_head", "num_attention_heads"), kMaxWidth);
    c.vocab = positive(j, "vocab_size", kMaxVocab);
    c.positions = positive(j, present(j, "n_positions") ? "n_positions" : "max_position_embeddings", kMaxPositions);
    if (c.hidden % c.heads != 0) j.fail("n_head", fmt::format("expected a divisor of n_embd ({})", c.hidden));
    if (present(j, "n_inner") && j.integer("n_inner") != 4 * c.hidden)
        j.fail("n_inner", fmt::format("expected null or 4 x n_embd ({}): dtsim's GPT-2 has the 4x MLP", 4 * c.hidden));
    if (present(j, "tie_word_embeddings") && !j.boolean_or("tie_word_embeddings", true))
        j.fail("tie_word_embeddings", "expected true: dtsim's GPT-2 ties lm_head to wte, as GPT2LMHeadModel does");
    return HfModel{.config = c,
                   .description = fmt::format("GPT-2 from {}: {} layers, hidden {}, {} heads, context {}", j.file(),
                                              c.layers, c.hidden, c.heads, c.positions)};
}

HfModel llama_config(const JsonView& j, const std::string& type) {
    LlamaConfig c;
    c.hidden = positive(j, "hidden_size", kMaxWidth);
    c.layers = positive(j, "num_hidden_layers", kMaxLayers);
    c.heads = positive(j, "num_attention_heads", kMaxWidth);
    c.kv_heads = positive_or(j, "num_key_value_heads", c.heads, kMaxWidth);
    c.intermediate = positive(j, "intermediate_size", kMaxWidth * 8);
    c.vocab = positive(j, "vocab_size", kMaxVocab);
    c.positions = positive(j, "max_position_embeddings", kMaxPositions);
    const bool gemma = type == "gemma" || type == "gemma2";
    // GemmaConfig and Gemma2Config default head_dim to 256, not hidden / heads.
    c.head_dim = positive_or(j, "head_dim", gemma ? 256 : 0, kMaxWidth);
    if (c.head_dim == 0) {
        if (c.hidden % c.heads != 0)
            j.fail("num_attention_heads", fmt::format("expected a divisor of hidden_size ({}), or a head_dim", c.hidden));
        c.head_dim = c.hidden / c.heads;
    }
    if (c.heads % c.kv_heads != 0)
        j.fail("num_key_value_heads", fmt::format("expected a divisor of num_attention_heads ({})", c.heads));
    // Qwen2Attention: q, k and v with bias, o without; Llama's attention_bias: all four.
    if (type == "qwen2" || type == "qwen2_moe") {
        c.qkv_bias = true;
    } else if (j.boolean_or("attention_bias", false)) {
        c.qkv_bias = true;
        c.o_bias = true;
    }
    if (j.boolean_or("mlp_bias", false)) j.fail("mlp_bias", "expected false: MLP biases are not modelled");
    if (gemma) {
        // GeGLU: Gemma reads hidden_activation, falling back to hidden_act.
        const std::string act_key = present(j, "hidden_activation") ? "hidden_activation" : "hidden_act";
        if (present(j, act_key) && !j.string(act_key).starts_with("gelu"))
            j.fail(act_key, "expected a gelu variant (Gemma's gated GELU MLP)");
    } else if (present(j, "hidden_act") && j.string("hidden_act") != "silu") {
        j.fail("hidden_act", "expected \"silu\" (the gated SiLU MLP of the Llama family)");
    }
    // Gemma ties lm_head to the embeddings unless told otherwise; the others do not.
    c.tied_embeddings = j.boolean_or("tie_word_embeddings", gemma);
    c.scaled_embeddings = gemma;
    c.sandwich_norms = type == "gemma2";
    c.fused_projections = type == "phi3";
    c.model_type = type;
    if (type == "mixtral") {  // MixtralSparseMoeBlock: every layer, experts of intermediate_size
        c.experts = positive(j, "num_local_experts", 4096);
        c.experts_per_token = positive(j, "num_experts_per_tok", 4096);
        c.expert_intermediate = c.intermediate;
    } else if (type == "qwen2_moe") {  // Qwen2MoeSparseMoeBlock, with its shared expert
        c.experts = positive(j, "num_experts", 4096);
        c.experts_per_token = positive(j, "num_experts_per_tok", 4096);
        c.expert_intermediate = positive(j, "moe_intermediate_size", kMaxWidth * 8);
        c.shared_expert_intermediate = positive(j, "shared_expert_intermediate_size", kMaxWidth * 8);
        if (present(j, "decoder_sparse_step") && j.integer("decoder_sparse_step") != 1)
            j.fail("decoder_sparse_step", "expected 1: dense layers between the sparse ones are not modelled yet");
        if (present(j, "mlp_only_layers") && !j.value().at("mlp_only_layers").empty())
            j.fail("mlp_only_layers", "expected []: dense layers among the sparse ones are not modelled yet");
    }
    if (c.experts > 0 && c.experts_per_token > c.experts)
        j.fail("num_experts_per_tok", fmt::format("expected at most the number of experts ({})", c.experts));
    return HfModel{.config = c,
                   .description = fmt::format("{} from {}: {} layers, hidden {}, {} heads ({} KV), {}context {}", type,
                                              j.file(), c.layers, c.hidden, c.heads, c.kv_heads,
                                              c.experts > 0 ? fmt::format("{} experts (top {}), ", c.experts,
                                                                          c.experts_per_token)
                                                            : std::string(),
                                              c.positions)};
}

// GPTNeoXConfig and FalconConfig (with Falcon's n_embed/n_head/n_layer
// aliases and its pre-transformers model types RefinedWeb, the 40B layout,
// and RefinedWebModel, the 7B one).
HfModel neox_config(const JsonView& j, const std::string& type) {
    const auto alias = [&](const std::string& name, const std::string& old) { return present(j, old) ? old : name; };
    NeoxConfig c;
    const bool falcon = type != "gpt_neox";
    c.family = falcon ? NeoxConfig::Family::falcon : NeoxConfig::Family::gpt_neox;
    c.hidden = positive(j, alias("hidden_size", "n_embed"), kMaxWidth);
    c.layers = positive(j, alias("num_hidden_layers", "n_layer"), kMaxLayers);
    c.heads = positive(j, alias("num_attention_heads", "n_head"), kMaxWidth);
    c.vocab = positive(j, "vocab_size", kMaxVocab);
    c.positions = positive_or(j, "max_position_embeddings", 2048, kMaxPositions);
    if (c.hidden % c.heads != 0)
        j.fail("num_attention_heads", fmt::format("expected a divisor of hidden_size ({})", c.hidden));
    if (!falcon) {
        c.intermediate = positive(j, "intermediate_size", kMaxWidth * 8);
        c.attention_bias = j.boolean_or("attention_bias", true);
        c.parallel = j.boolean_or("use_parallel_residual", true);
        c.tied_embeddings = j.boolean_or("tie_word_embeddings", false);
        c.kv_heads = c.heads;
    } else {
        if (j.boolean_or("alibi", false)) j.fail("alibi", "expected false: ALiBi attention is not modelled");
        if (j.boolean_or("apply_residual_connection_post_layernorm", false))
            j.fail("apply_residual_connection_post_layernorm", "expected false: post-norm residuals are not modelled");
        const bool new_arch = j.boolean_or("new_decoder_architecture", type == "RefinedWeb");
        c.parallel = j.boolean_or("parallel_attn", true);
        c.kv_heads = new_arch ? positive_or(j, alias("num_kv_heads", "n_head_kv"), c.heads, kMaxWidth)
                     : j.boolean_or("multi_query", true) ? 1
                                                         : c.heads;
        if (c.heads % c.kv_heads != 0)
            j.fail("num_kv_heads", fmt::format("expected a divisor of num_attention_heads ({})", c.heads));
        c.intermediate = positive_or(j, "ffn_hidden_size", 4 * c.hidden, kMaxWidth * 8);
        c.attention_bias = c.mlp_bias = j.boolean_or("bias", false);
        // FalconDecoderLayer: two norms unless attention is parallel and
        // num_ln_in_parallel_attn (2 by default with the new architecture) says one.
        const std::int64_t parallel_norms = positive_or(j, "num_ln_in_parallel_attn", new_arch ? 2 : 1, 2);
        c.norms = !c.parallel ? 2 : static_cast<int>(parallel_norms);
        c.tied_embeddings = j.boolean_or("tie_word_embeddings", true);
    }
    return HfModel{.config = c,
                   .description = fmt::format("{} from {}: {} layers, hidden {}, {} heads ({} KV), context {}",
                                              falcon ? "falcon" : "gpt_neox", j.file(), c.layers, c.hidden, c.heads,
                                              c.kv_heads, c.positions)};
}

}  // namespace

bool is_hf_config_path(const std::string& model) {
    if (model.ends_with(".json")) return true;
    std::error_code ec;
    return std::filesystem::is_directory(model, ec);
}

HfModel read_hf_config(const std::string& path) {
    std::string file = path;
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) file = (std::filesystem::path(path) / "config.json").string();
    if (!std::filesystem::exists(file, ec))
        throw ParseError(file, "", "no such file: --model takes a model name, or a HuggingFace config.json or the "
                                   "directory holding one");
    return parse_hf_config(read_json_file(file), file);
}

HfModel parse_hf_config(const Json& root, const std::string& file) {
    const JsonView j(root, file);
    if (!present(j, "model_type"))
        j.fail("model_type", fmt::format("expected a HuggingFace model type ({})", kModelTypes));
    if (!root.is_object()) j.fail("", "expected a JSON object");
    const std::string type = j.string("model_type");
    if (type == "gpt2") return gpt2_config(j);
    for (const char* llama_like : {"llama", "mistral", "qwen2", "mixtral", "qwen2_moe", "gemma", "gemma2", "phi3"})
        if (type == llama_like) return llama_config(j, type);
    if (type == "gpt_neox" || type == "falcon" || type == "RefinedWeb" || type == "RefinedWebModel")
        return neox_config(j, type);
    j.fail("model_type", fmt::format("expected {} (got '{}')", kModelTypes, type));
}

}  // namespace dtsim::models
