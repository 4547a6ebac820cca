// Private to dtsim_models: the model builders and the small helpers they share.
#pragma once

#include "dtsim/models/workload.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace dtsim::models {

// Flops per element charged for the elementwise kernels (rough, stated once).
namespace flops_per_element {
inline constexpr double layer_norm = 8;  // mean, variance, normalise, scale, shift
inline constexpr double rms_norm = 4;    // square-sum, rsqrt-scale, weight
inline constexpr double gelu = 8;        // tanh approximation
inline constexpr double silu = 4;        // x * sigmoid(x)
inline constexpr double relu = 1;
inline constexpr double mul = 1;
inline constexpr double add = 1;            // residual / position add
inline constexpr double dropout = 2;        // compare + scale
inline constexpr double softmax = 5;        // scale, mask, max, exp, normalise (one fused kernel)
inline constexpr double rotary = 3;         // x*cos + rotate(x)*sin
inline constexpr double cross_entropy = 5;  // log-softmax + gather
inline constexpr double mse = 3;            // subtract, square, sum
inline constexpr double batch_norm = 8;     // batch mean, variance, normalise, scale, shift (as layer_norm)
inline constexpr double max_pool = 9;       // one compare per window element (3x3), per output element
inline constexpr double avg_pool = 1;       // one add per input element
}  // namespace flops_per_element

// Backward of an elementwise op: same bytes and flops, named "<name>.bwd".
Op elementwise_backward(const Op& forward);

// Builds one Layer: records forward ops and, per op, its backward ops; the
// layer's backward is those groups in reverse order.
class LayerBuilder {
public:
    LayerBuilder(std::string name, int block, DType dtype);

    DType dtype() const { return dtype_; }
    void param(std::string name, std::vector<std::int64_t> shape, int index);
    void gemm(std::string name, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch = 1,
              bool with_input_grad = true, GemmLayout layout = GemmLayout::nn);
    // torch's nn.Linear over `tokens` rows: y = x W^T, an NT GEMM.
    void linear(std::string name, std::int64_t tokens, std::int64_t out_features, std::int64_t in_features,
                bool with_input_grad = true) {
        gemm(std::move(name), tokens, out_features, in_features, 1, with_input_grad, GemmLayout::nt);
    }
    // Elementwise op in the activation dtype; its backward follows elementwise_backward.
    void elementwise(std::string name, std::int64_t bytes, double flops);
    void op(Op forward, std::vector<Op> backward);
    void save(std::int64_t bytes);
    // Memory the layer's forward and backward hold only while they run.
    void transient(std::int64_t forward_bytes, std::int64_t backward_bytes);
    Layer finish() &&;

private:
    Layer layer_;
    DType dtype_;
    std::vector<std::vector<Op>> backward_groups_;
};

void add_embedding(LayerBuilder& lb, const std::string& name, std::int64_t rows, std::int64_t width);
void add_loss(LayerBuilder& lb, const std::string& name, std::int64_t elements, double flops_per_element);

// Fused causal attention core (SDPA's FlashAttention / memory-efficient kernel)
// for micro-batch b, sequence s, `heads` query heads and `kv_heads` key/value
// heads of width head_dim. Adds its ops and saved bytes to `lb`; see workload.cpp.
void add_flash_attention(LayerBuilder& lb, std::int64_t b, std::int64_t s, std::int64_t heads, std::int64_t kv_heads,
                         std::int64_t head_dim);

// A rotary causal self-attention core without parameters (Llama's and
// GPT-NeoX's self_attn/attention core): rotary on q and k, then eager
// (repeat_kv when kv_heads < heads, QK^T, scale + mask + softmax, AV, the
// head-merge copy) or the fused kernel of add_flash_attention, which reads
// the shared K/V heads directly. See llama.cpp for what each saves.
void add_rotary_attention(LayerBuilder& lb, std::int64_t b, std::int64_t s, std::int64_t heads, std::int64_t kv_heads,
                          std::int64_t head_dim, AttentionImpl attention);

// Eager modules of HuggingFace models, kernel by kernel as torch runs them
// (eager_ops.cpp): RMSNorm over rows x width, rotary embedding on q and k,
// SiLU(gate) * up and GPT-2's gelu_new over `elements`, and the fp32-upcast cross-entropy over
// rows x vocab logits. Each adds its ops and saved bytes to `lb`. `autocast`
// (workload.hpp) says which dtypes torch.autocast gives their tensors.
void add_rms_norm(LayerBuilder& lb, const std::string& name, std::int64_t rows, std::int64_t width,
                  Autocast autocast = Autocast::none);
void add_rotary(LayerBuilder& lb, std::int64_t q_elements, std::int64_t k_elements);
void add_swiglu(LayerBuilder& lb, std::int64_t elements);
void add_gelu_new(LayerBuilder& lb, std::int64_t elements, Autocast autocast = Autocast::none);
// torch.nn.LayerNorm over rows x width, its input the residual stream; under
// autocast (layer_norm is on its fp32 list) the output is fp32 and is cast
// to the activation dtype for the one matmul that reads it.
void add_layer_norm(LayerBuilder& lb, const std::string& name, std::int64_t rows, std::int64_t width,
                    Autocast autocast);
// A residual add of a block's branch (activation dtype) into the residual
// stream, over `elements`; fp32 under Autocast::fp32_weights.
void add_residual(LayerBuilder& lb, std::int64_t elements, Autocast autocast);
// Under Autocast::fp32_weights a matmul's fp32 input (a norm's output) is cast
// to the activation dtype by the matmul itself: the cast kernel and its
// backward; true when it cast, so the caller saves the matmul's own copy.
// Nothing otherwise.
bool add_autocast_input_cast(LayerBuilder& lb, const std::string& name, std::int64_t elements, Autocast autocast);
// Under Autocast::fp32_weights every matmul's fp32 weights (and biases) are
// cast to the activation dtype once per forward (copy_ kernels, non-vectorized),
// and their 16-bit gradients back to fp32 after the weight-gradient GEMM:
// add_autocast_weight_casts adds both to every layer that owns parameters and
// runs a matmul; add_weight_cast to a layer whose matmul uses a weight another
// layer owns (a tied head). Nothing otherwise.
void add_autocast_weight_casts(Workload& w);
void add_weight_cast(LayerBuilder& lb, std::int64_t elements, Autocast autocast);
void add_upcast_cross_entropy(LayerBuilder& lb, std::int64_t rows, std::int64_t vocab);

struct Gpt2Config {
    std::int64_t hidden = 768;
    std::int64_t layers = 12;
    std::int64_t heads = 12;
    std::int64_t vocab = 50257;
    std::int64_t positions = 1024;
};

// The Llama family's layout (LlamaForCausalLM; Mistral, Qwen2, Gemma, Gemma-2
// and Phi-3 share it up to the flags below). Gemma's GeGLU MLP is priced as
// the SwiGLU kernels: the same tensors and kernel count.
struct LlamaConfig {
    std::int64_t hidden = 4096;
    std::int64_t layers = 32;
    std::int64_t heads = 32;
    std::int64_t kv_heads = 32;
    std::int64_t intermediate = 11008;
    std::int64_t vocab = 32000;
    std::int64_t positions = 4096;
    std::int64_t head_dim = 0;     // 0: hidden / heads (HuggingFace's head_dim when it says otherwise)
    bool qkv_bias = false;         // q, k and v projections with bias (Qwen2; Llama's attention_bias)
    bool o_bias = false;           // o_proj with bias (Llama's attention_bias)
    bool tied_embeddings = false;  // lm_head shares embed_tokens.weight (tie_word_embeddings)
    // Phi-3: q, k and v as one qkv_proj, gate and up as one gate_up_proj
    // (defined after o_proj: o_proj, qkv_proj, gate_up_proj, down_proj).
    bool fused_projections = false;
    // Gemma-2: RMSNorms after attention and around the MLP too
    // (pre_feedforward_layernorm, post_feedforward_layernorm).
    bool sandwich_norms = false;
    // Gemma: the embeddings scaled by sqrt(hidden) in forward.
    bool scaled_embeddings = false;
    // A mixture of experts in every layer's MLP (Mixtral, Qwen2-MoE); 0: dense.
    std::int64_t experts = 0;
    std::int64_t experts_per_token = 0;
    std::int64_t expert_intermediate = 0;         // each expert's MLP width
    std::int64_t shared_expert_intermediate = 0;  // Qwen2-MoE's shared expert (0: none, Mixtral)
    std::string model_type = "llama";             // HuggingFace's model_type: the transformers module of its classes
};

// GPT-NeoX and Falcon (neox.cpp): LayerNorms with bias, a fused
// query_key_value, a plain GELU MLP, attention beside the MLP or before it.
struct NeoxConfig {
    enum class Family : std::uint8_t { gpt_neox, falcon };
    Family family = Family::gpt_neox;
    std::int64_t hidden = 768;
    std::int64_t layers = 12;
    std::int64_t heads = 12;
    std::int64_t kv_heads = 12;  // Falcon: 1 (multi_query) or num_kv_heads (new_decoder_architecture)
    std::int64_t intermediate = 3072;
    std::int64_t vocab = 50304;
    std::int64_t positions = 2048;
    bool attention_bias = true;  // query_key_value and dense
    bool mlp_bias = true;        // dense_h_to_4h and dense_4h_to_h
    int norms = 2;               // LayerNorms per layer: 2, or 1 shared by attention and MLP (Falcon-7B)
    bool parallel = true;        // x + attention(ln(x)) + mlp(ln(x)) (use_parallel_residual, parallel_attn)
    bool tied_embeddings = false;
};

// A model read from a HuggingFace config.json (hf_config.cpp).
struct HfModel {
    std::variant<Gpt2Config, LlamaConfig, NeoxConfig> config;
    std::string description;
};
// True when `--model` names a .json file or a directory (a HuggingFace model's).
bool is_hf_config_path(const std::string& model);
// A config.json's parsed JSON; `file` names it in errors.
HfModel parse_hf_config(const nlohmann::json& config, const std::string& file);

// The built-in HuggingFace models: models/hf_configs/<name>.json, embedded at
// build time (models/CMakeLists.txt).
struct EmbeddedConfig {
    const char* name;
    const char* json;
};
const std::vector<EmbeddedConfig>& embedded_hf_configs();
// Reads `path` (config.json, or a directory holding one); ParseError naming
// the file and the field for an unknown model_type or a missing field.
HfModel read_hf_config(const std::string& path);

// torchvision ResNet with Bottleneck blocks (v1.5: stride on the 3x3 conv).
// {3, 4, 6, 3} is resnet50; {3, 4, 23, 3} resnet101, {3, 8, 36, 3} resnet152.
struct ResNetConfig {
    std::vector<std::int64_t> blocks = {3, 4, 6, 3};  // Bottleneck blocks per stage (layer1..layer4)
    std::int64_t image_size = 224;                    // square input, 3 channels
    std::int64_t classes = 1000;
};

// Builders take validated arguments (micro_batch >= 1, 1 <= seq_len <= positions).
// A workload with its header fields set and no layers yet.
Workload empty_workload(const std::string& name, std::int64_t micro_batch, std::int64_t seq_len, DType activation_dtype,
                        AttentionImpl attention);

Workload build_mlp(const std::string& name, std::int64_t layers, std::int64_t width, std::int64_t micro_batch,
                   DType activation_dtype);
Workload build_gpt2(const std::string& name, const Gpt2Config& config, std::int64_t micro_batch, std::int64_t seq_len,
                    DType activation_dtype, AttentionImpl attention, Autocast autocast = Autocast::none);
Workload build_llama(const std::string& name, const LlamaConfig& config, std::int64_t micro_batch, std::int64_t seq_len,
                     DType activation_dtype, AttentionImpl attention, Autocast autocast = Autocast::none);
Workload build_neox(const std::string& name, const NeoxConfig& config, std::int64_t micro_batch, std::int64_t seq_len,
                    DType activation_dtype, AttentionImpl attention, Autocast autocast = Autocast::none);
// Images, not sequences: the workload's seq_len is 1.
Workload build_resnet(const std::string& name, const ResNetConfig& config, std::int64_t micro_batch,
                      DType activation_dtype);

}  // namespace dtsim::models
