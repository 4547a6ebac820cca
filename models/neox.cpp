// GPT-NeoX (HuggingFace GPTNeoXForCausalLM: Pythia, GPT-NeoX-20B) and Falcon
// (FalconForCausalLM), module-granular: LayerNorms with bias, one fused
// query_key_value projection (Falcon: multi-query or grouped KV heads), rotary
// attention, a plain GELU MLP (dense_h_to_4h, dense_4h_to_h), and attention
// beside the MLP (parallel residual) or before it.
//
// Layers in forward order per block: the attention's LayerNorm (GPT-NeoX
// input_layernorm; Falcon ln_attn, or input_layernorm when one norm serves
// both), query_key_value, core (rotary, then flash or eager attention as in
// llama.cpp), dense; the MLP's LayerNorm where it has its own
// (post_attention_layernorm, ln_mlp), dense_h_to_4h (+ GELU), dense_4h_to_h
// (+ the residual adds). Then the final LayerNorm, the head (GPT-NeoX's
// untied embed_out; Falcon's lm_head, tied to word_embeddings) and the loss.
//
// Parameter indices follow model.parameters(): GPT-NeoX defines each layer's
// two LayerNorms before its attention and MLP; Falcon its attention and MLP
// before its LayerNorms.
//
// Saved activations per block, in elements of the activation dtype: each
// LayerNorm its input (sbh); query_key_value its input (sbh); the core as
// llama.cpp's (flash: Q, K and V at their widths and O, plus the fp32
// log-sum-exp); dense its input (sbh); dense_h_to_4h its input (sbh) and the
// GELU input (sbi); dense_4h_to_h its input (sbi).
#include "builders.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string_view>

namespace dtsim::models {

Workload build_neox(const std::string& name, const NeoxConfig& c, std::int64_t micro_batch, std::int64_t seq_len,
                    DType activation_dtype, AttentionImpl attention,
                    Autocast /*autocast: its dtype rules are modelled for GPT-2 and Llama only, not yet here*/) {
    Workload w = empty_workload(name, micro_batch, seq_len, activation_dtype, attention);
    w.block_class = c.family == NeoxConfig::Family::falcon
                        ? "transformers.models.falcon.modeling_falcon.FalconDecoderLayer"
                        : "transformers.models.gpt_neox.modeling_gpt_neox.GPTNeoXLayer";
    const std::int64_t b = micro_batch;
    const std::int64_t s = seq_len;
    const std::int64_t h = c.hidden;
    const std::int64_t a = c.heads;
    const std::int64_t hd = h / a;
    const std::int64_t qd = a * hd;
    const std::int64_t kvd = c.kv_heads * hd;
    const std::int64_t inter = c.intermediate;
    const std::int64_t T = b * s;
    const std::int64_t dt = dtype_bytes(activation_dtype);
    const DType dtype = activation_dtype;
    auto d = [](std::int64_t x) { return static_cast<double>(x); };
    namespace fpe = flops_per_element;
    const bool falcon = c.family == NeoxConfig::Family::falcon;
    const std::string model = falcon ? "transformer." : "gpt_neox.";
    const std::string attn = falcon ? "self_attention." : "attention.";

    // Each module's first parameter index within a layer, in definition order.
    enum Slot { norm1, norm2, qkv, dense, h_to_4h, four_h_to_h };
    const int attn_t = c.attention_bias ? 2 : 1, mlp_t = c.mlp_bias ? 2 : 1, norm2_t = c.norms == 2 ? 2 : 0;
    const std::array<std::pair<Slot, int>, 6> order = falcon
                                                          ? std::array<std::pair<Slot, int>, 6>{{{qkv, attn_t},
                                                                                                 {dense, attn_t},
                                                                                                 {h_to_4h, mlp_t},
                                                                                                 {four_h_to_h, mlp_t},
                                                                                                 {norm1, 2},
                                                                                                 {norm2, norm2_t}}}
                                                          : std::array<std::pair<Slot, int>, 6>{{{norm1, 2},
                                                                                                 {norm2, norm2_t},
                                                                                                 {qkv, attn_t},
                                                                                                 {dense, attn_t},
                                                                                                 {h_to_4h, mlp_t},
                                                                                                 {four_h_to_h, mlp_t}}};
    std::array<int, 6> offset{};
    int per_layer = 0;
    for (const auto& [slot, tensors] : order) {
        offset[slot] = per_layer;
        per_layer += tensors;
    }
    // A LayerNorm module: weight and bias, its kernel, its saved input.
    auto layer_norm = [&](const std::string& module, int blk, int at) {
        LayerBuilder lb(module, blk, dtype);
        lb.param(module + ".weight", {h}, at);
        lb.param(module + ".bias", {h}, at + 1);
        lb.elementwise(std::string(module.substr(module.rfind('.') + 1)), 2 * T * h * dt, fpe::layer_norm * d(T * h));
        lb.save(T * h * dt);
        w.layers.push_back(std::move(lb).finish());
    };
    // nn.Linear with optional bias, saving its input.
    auto linear = [&](LayerBuilder& lb, const std::string& module, std::int64_t out, std::int64_t in, bool bias,
                      int at) {
        lb.param(module + ".weight", {out, in}, at);
        if (bias) lb.param(module + ".bias", {out}, at + 1);
        lb.linear(module.substr(module.rfind('.') + 1), T, out, in);
        lb.save(T * in * dt);
    };

    const std::string embed = model + (falcon ? "word_embeddings" : "embed_in");
    {
        LayerBuilder lb(embed, -1, dtype);
        lb.param(embed + ".weight", {c.vocab, h}, 0);
        add_embedding(lb, embed, T, h);
        lb.save(8 * T);
        w.layers.push_back(std::move(lb).finish());
    }
    for (std::int64_t i = 0; i < c.layers; ++i) {
        const std::string p = model + (falcon ? "h." : "layers.") + std::to_string(i) + ".";
        const int blk = static_cast<int>(i);
        const int base = 1 + per_layer * blk;
        const char* first_norm = falcon && c.parallel && c.norms == 2 ? "ln_attn" : "input_layernorm";
        const char* second_norm =
            falcon ? (c.parallel ? "ln_mlp" : "post_attention_layernorm") : "post_attention_layernorm";
        layer_norm(p + first_norm, blk, base + offset[norm1]);
        {
            LayerBuilder lb(p + attn + "query_key_value", blk, dtype);
            linear(lb, p + attn + "query_key_value", qd + 2 * kvd, h, c.attention_bias, base + offset[qkv]);
            w.layers.push_back(std::move(lb).finish());
        }
        {
            LayerBuilder lb(p + attn + "core", blk, dtype);
            add_rotary_attention(lb, b, s, a, c.kv_heads, hd, attention);
            w.layers.push_back(std::move(lb).finish());
        }
        {
            LayerBuilder lb(p + attn + "dense", blk, dtype);
            linear(lb, p + attn + "dense", h, qd, c.attention_bias, base + offset[dense]);
            if (!c.parallel) lb.elementwise("residual", 3 * T * h * dt, fpe::add * d(T * h));
            w.layers.push_back(std::move(lb).finish());
        }
        if (c.norms == 2) layer_norm(p + second_norm, blk, base + offset[norm2]);
        {
            LayerBuilder lb(p + "mlp.dense_h_to_4h", blk, dtype);
            linear(lb, p + "mlp.dense_h_to_4h", inter, h, c.mlp_bias, base + offset[h_to_4h]);
            lb.elementwise("gelu", 2 * T * inter * dt, fpe::gelu * d(T * inter));
            lb.save(T * inter * dt);
            w.layers.push_back(std::move(lb).finish());
        }
        {
            LayerBuilder lb(p + "mlp.dense_4h_to_h", blk, dtype);
            linear(lb, p + "mlp.dense_4h_to_h", h, inter, c.mlp_bias, base + offset[four_h_to_h]);
            // Parallel: x + attention + MLP, two adds; otherwise the MLP's one.
            const std::int64_t adds = c.parallel ? 2 : 1;
            lb.elementwise("residual", adds * 3 * T * h * dt, fpe::add * d(adds * T * h));
            w.layers.push_back(std::move(lb).finish());
        }
    }
    const int after = 1 + per_layer * static_cast<int>(c.layers);
    layer_norm(model + (falcon ? "ln_f" : "final_layer_norm"), -1, after);
    {
        const std::string head = falcon ? "lm_head" : "embed_out";
        LayerBuilder lb(head, -1, dtype);
        // Tied: the logits reuse the embedding, whose gradient sums both uses.
        if (!c.tied_embeddings) lb.param(head + ".weight", {c.vocab, h}, after + 2);
        lb.linear(head, T, c.vocab, h);
        lb.save(T * h * dt);
        w.layers.push_back(std::move(lb).finish());
    }
    {
        LayerBuilder lb("loss", -1, dtype);
        add_upcast_cross_entropy(lb, T, c.vocab);
        w.layers.push_back(std::move(lb).finish());
    }
    return w;
}

}  // namespace dtsim::models
