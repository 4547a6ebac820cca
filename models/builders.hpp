// Private to dtsim_models: the model builders and the small helpers they share.
#pragma once

#include "dtsim/models/workload.hpp"

#include <cstdint>
#include <string>
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
              bool with_input_grad = true);
    // Elementwise op in the activation dtype; its backward follows elementwise_backward.
    void elementwise(std::string name, std::int64_t bytes, double flops);
    void op(Op forward, std::vector<Op> backward);
    void save(std::int64_t bytes);
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

struct Gpt2Config {
    std::int64_t hidden = 768;
    std::int64_t layers = 12;
    std::int64_t heads = 12;
    std::int64_t vocab = 50257;
    std::int64_t positions = 1024;
};

struct LlamaConfig {
    std::int64_t hidden = 4096;
    std::int64_t layers = 32;
    std::int64_t heads = 32;
    std::int64_t kv_heads = 32;
    std::int64_t intermediate = 11008;
    std::int64_t vocab = 32000;
    std::int64_t positions = 4096;
};

// Builders take validated arguments (micro_batch >= 1, 1 <= seq_len <= positions).
// A workload with its header fields set and no layers yet.
Workload empty_workload(const std::string& name, std::int64_t micro_batch, std::int64_t seq_len, DType activation_dtype,
                        AttentionImpl attention);

Workload build_mlp(const std::string& name, std::int64_t layers, std::int64_t width, std::int64_t micro_batch,
                   DType activation_dtype);
Workload build_gpt2(const std::string& name, const Gpt2Config& config, std::int64_t micro_batch, std::int64_t seq_len,
                    DType activation_dtype, AttentionImpl attention);
Workload build_llama(const std::string& name, const LlamaConfig& config, std::int64_t micro_batch, std::int64_t seq_len,
                     DType activation_dtype, AttentionImpl attention);

}  // namespace dtsim::models
