// Llama-2 (HuggingFace LlamaForCausalLM), module-granular, with either
// attention implementation (AttentionImpl: flash = HuggingFace's default
// "sdpa", or eager).
//
// Layers in forward order: embed_tokens, then per decoder layer layers.<i>:
// input_layernorm (RMSNorm), self_attn.q_proj, self_attn.k_proj,
// self_attn.v_proj (GQA: k/v output n_kv_heads*head_dim), self_attn.core
// (no parameters: rotary on q and k, then eager: repeat_kv when n_kv_heads <
// n_heads, QK^T, scale+mask+softmax, AV; flash: the fused kernel of
// add_flash_attention in workload.cpp, which reads the shared K/V heads
// directly, no repeat_kv; then the head merge), self_attn.o_proj (+ residual
// add), post_attention_layernorm, mlp.gate_proj, mlp.up_proj, mlp.down_proj
// (SiLU(gate) * up, then down_proj, + residual add); then norm, lm_head
// (untied), loss.
//
// Parameter names follow the brief's convention (no "model." prefix):
// embed_tokens.weight, layers.<i>.self_attn.q_proj.weight, ..., norm.weight,
// lm_head.weight. nn.Linear weights are [out, in]. Indices follow
// model.parameters() (definition order): embed_tokens, per layer q,k,v,o,
// gate,up,down, input_layernorm, post_attention_layernorm, then norm, lm_head,
// which differs from forward order.
//
// Saved activations: Korthikanti et al.'s accounting without dropout (no masks,
// and AV saves the softmax output itself, so it is counted once), with the
// SwiGLU intermediates. Per layer, in elements of the activation dtype:
//   input_layernorm           (eager RMSNorm, eager_ops.cpp) x in fp32
//                             and the normalised output          3sbh
//   q_proj                    input (shared by q/k/v_proj; it is
//                             freed after q_proj's backward, the last)  sbh
//   k_proj, v_proj            -                                   0
//   self_attn.core  eager:    rotated Q, repeated K and V (eager
//                             attention materialises all heads)   3sbh
//                             softmax output                      as^2b
//                   flash:    Q, K and V at kv-head width (kvd =
//                             n_kv_heads*head_dim), output O      2sbh + 2sb*kvd
//                             log-sum-exp, fp32 (4 bytes each)    asb
//   o_proj                    input                               sbh
//   post_attention_layernorm  as input_layernorm                  3sbh
//   gate_proj                 input (shared with up_proj)         sbh
//   up_proj                   -                                   0
//   down_proj                 SiLU input, SiLU output and up output
//                             (the mul's operands), down_proj input  4sbi
// plus the norms' fp32 row statistics (4sb bytes each), i.e. 24sbh + 8sbi +
// 2as^2b + 8sb bytes per layer for 16-bit activations with eager attention;
// with flash 22sbh + 4sb*kvd + 8sbi + 4asb + 8sb (26sbh + 8sbi + 4asb + 8sb
// without GQA). (For fp32 activations the norms save 2sbh elements each.)
// Outside layers: embed_tokens the token ids (int64), norm as the layers'
// norms, lm_head its input, the loss its log-softmax output (b*s*vocab, fp32:
// HuggingFace upcasts the logits before the loss).
//
// RMSNorm, rotary, SiLU*up and the loss are counted kernel by kernel as torch
// runs them in eager mode (eager_ops.cpp), from Kineto traces of real blocks.
#include "builders.hpp"

#include <fmt/format.h>

#include <map>

namespace dtsim::models {
namespace {

// A mixture-of-experts MLP (Mixtral's block_sparse_moe, Qwen2-MoE's mlp):
// the router, then every expert's parameters (all resident) with the work
// of the T x top-k routed tokens, as one batched GEMM per projection over
// the experts (ceil(T k / E) rows each); Qwen2-MoE adds a shared expert over
// all T tokens, scaled by a sigmoid gate. Parameter indices from `first`,
// in model.parameters() order. Expert parallelism is not modelled: every
// rank holds and runs every expert.
void add_moe(Workload& w, const LlamaConfig& c, const std::string& p, int blk, int first, std::int64_t T,
             DType dtype) {
    namespace fpe = flops_per_element;
    const std::int64_t h = c.hidden, E = c.experts, k = c.experts_per_token, I = c.expert_intermediate;
    const std::int64_t dt = dtype_bytes(dtype);
    const std::int64_t routed = T * k;
    const std::int64_t rows = (routed + E - 1) / E;
    const bool qwen = c.shared_expert_intermediate > 0;
    const std::string block = p + (qwen ? "mlp." : "block_sparse_moe.");
    auto d = [](std::int64_t x) { return static_cast<double>(x); };
    {
        LayerBuilder lb(block + "gate", blk, dtype);
        lb.param(block + "gate.weight", {E, h}, first);
        lb.linear("router", T, E, h);
        lb.elementwise("router_softmax_topk", 2 * T * E * 4, fpe::softmax * d(T * E));  // fp32 routing weights
        lb.save(T * h * dt);
        w.layers.push_back(std::move(lb).finish());
    }
    {
        LayerBuilder lb(block + "experts", blk, dtype);
        const char* names[3] = {qwen ? "gate_proj" : "w1", qwen ? "up_proj" : "w3", qwen ? "down_proj" : "w2"};
        for (std::int64_t e = 0; e < E; ++e) {
            const int at = first + 1 + 3 * static_cast<int>(e);
            const std::string ep = fmt::format("{}experts.{}.", block, e);
            // Mixtral defines w1, w2, w3; Qwen2-MoE gate_proj, up_proj, down_proj.
            lb.param(ep + names[0] + ".weight", {I, h}, at);
            lb.param(ep + (qwen ? "up_proj" : "w2") + ".weight", qwen ? std::vector<std::int64_t>{I, h}
                                                                       : std::vector<std::int64_t>{h, I},
                     at + 1);
            lb.param(ep + (qwen ? "down_proj" : "w3") + ".weight", qwen ? std::vector<std::int64_t>{h, I}
                                                                         : std::vector<std::int64_t>{I, h},
                     at + 2);
        }
        lb.elementwise("gather_tokens", 2 * routed * h * dt, 0);
        lb.gemm(std::string(names[0]), rows, I, h, E, true, GemmLayout::nt);
        lb.gemm(std::string(names[1]), rows, I, h, E, true, GemmLayout::nt);
        add_swiglu(lb, routed * I);
        lb.gemm(std::string(names[2]), rows, h, I, E, true, GemmLayout::nt);
        lb.elementwise("weight_and_scatter", 3 * routed * h * dt, fpe::mul * d(routed * h));
        lb.save(routed * h * dt + 4 * routed * I * dt);
        if (!qwen) lb.elementwise("residual", 3 * T * h * dt, fpe::add * d(T * h));
        w.layers.push_back(std::move(lb).finish());
    }
    if (!qwen) return;
    {
        const std::int64_t S = c.shared_expert_intermediate;
        const int at = first + 1 + 3 * static_cast<int>(E);
        LayerBuilder lb(block + "shared_expert", blk, dtype);
        lb.param(block + "shared_expert.gate_proj.weight", {S, h}, at);
        lb.param(block + "shared_expert.up_proj.weight", {S, h}, at + 1);
        lb.param(block + "shared_expert.down_proj.weight", {h, S}, at + 2);
        lb.param(block + "shared_expert_gate.weight", {1, h}, at + 3);
        lb.linear("shared_gate_proj", T, S, h);
        lb.linear("shared_up_proj", T, S, h);
        add_swiglu(lb, T * S);
        lb.linear("shared_down_proj", T, h, S);
        lb.linear("shared_expert_gate", T, 1, h);
        lb.elementwise("sigmoid_scale_add", 4 * T * h * dt, 3 * d(T * h));
        lb.save(4 * T * S * dt);
        lb.elementwise("residual", 3 * T * h * dt, fpe::add * d(T * h));
        w.layers.push_back(std::move(lb).finish());
    }
}

}  // namespace

Workload build_llama(const std::string& name, const LlamaConfig& c, std::int64_t micro_batch, std::int64_t seq_len,
                     DType activation_dtype, AttentionImpl attention, Autocast autocast) {
    Workload w = empty_workload(name, micro_batch, seq_len, activation_dtype, attention);
    w.autocast = autocast;
    // transformers' modeling_<type>.py: each type's decoder layer class.
    static const std::map<std::string, std::string> kBlockClass = {
        {"llama", "LlamaDecoderLayer"},     {"mistral", "MistralDecoderLayer"},    {"qwen2", "Qwen2DecoderLayer"},
        {"mixtral", "MixtralDecoderLayer"}, {"qwen2_moe", "Qwen2MoeDecoderLayer"}, {"gemma", "GemmaDecoderLayer"},
        {"gemma2", "Gemma2DecoderLayer"},   {"phi3", "Phi3DecoderLayer"}};
    w.block_class = fmt::format("transformers.models.{0}.modeling_{0}.{1}", c.model_type, kBlockClass.at(c.model_type));

    const std::int64_t b = micro_batch;
    const std::int64_t s = seq_len;
    const std::int64_t h = c.hidden;
    const std::int64_t a = c.heads;
    const std::int64_t hd = c.head_dim > 0 ? c.head_dim : h / a;
    const std::int64_t qd = a * hd;  // h unless the config sets head_dim
    const std::int64_t kvd = c.kv_heads * hd;
    const std::int64_t inter = c.intermediate;
    const std::int64_t T = b * s;
    const std::int64_t dt = dtype_bytes(activation_dtype);
    const DType dtype = activation_dtype;
    auto d = [](std::int64_t x) { return static_cast<double>(x); };
    namespace fpe = flops_per_element;
    // Parameter tensors per decoder layer, in model.parameters() order: q, k,
    // v (each weight, then bias with qkv_bias), o (weight, bias with o_bias),
    // gate, up, down, input_layernorm, post_attention_layernorm (Gemma-2: then
    // pre_ and post_feedforward_layernorm). Phi-3: o, qkv, gate_up, down, norms.
    const bool fused = c.fused_projections;
    const int qkv = c.qkv_bias ? 2 : 1;
    const int o_at = fused ? 0 : 3 * qkv;
    const int qkv_at = fused ? 1 : 0;
    const int mlp_at = fused ? 2 : o_at + (c.o_bias ? 2 : 1);
    // The MLP's tensors: gate, up, down (Phi-3: gate_up, down); a mixture of
    // experts: the router, each expert's three, and Qwen2-MoE's shared expert
    // (three) and its gate.
    const bool moe = c.experts > 0;
    const bool shared = c.shared_expert_intermediate > 0;
    const int mlp_params = moe ? 1 + 3 * static_cast<int>(c.experts) + (shared ? 4 : 0) : fused ? 2 : 3;
    const int norms_at = mlp_at + mlp_params;
    const int per_layer = norms_at + (c.sandwich_norms ? 4 : 2);

    {
        LayerBuilder lb("embed_tokens", -1, dtype);
        lb.param("embed_tokens.weight", {c.vocab, h}, 0);
        add_embedding(lb, "embed_tokens", T, h);
        if (c.scaled_embeddings) lb.elementwise("embed_scale", 2 * T * h * dt, fpe::mul * d(T * h));
        lb.save(8 * T);
        w.layers.push_back(std::move(lb).finish());
    }

    for (std::int64_t i = 0; i < c.layers; ++i) {
        const std::string p = fmt::format("layers.{}.", i);
        const int blk = static_cast<int>(i);
        const int base = 1 + per_layer * blk;
        {
            LayerBuilder lb(p + "input_layernorm", blk, dtype);
            lb.param(p + "input_layernorm.weight", {h}, base + norms_at);
            add_rms_norm(lb, "input_layernorm", T, h, autocast);
            w.layers.push_back(std::move(lb).finish());
        }
        if (fused) {
            LayerBuilder lb(p + "self_attn.qkv_proj", blk, dtype);
            lb.param(p + "self_attn.qkv_proj.weight", {qd + 2 * kvd, h}, base + qkv_at);
            add_autocast_input_cast(lb, "qkv_proj", T * h, autocast);
            lb.linear("qkv_proj", T, qd + 2 * kvd, h);
            lb.save(T * h * dt);
            w.layers.push_back(std::move(lb).finish());
        } else {
            {
                LayerBuilder lb(p + "self_attn.q_proj", blk, dtype);
                lb.param(p + "self_attn.q_proj.weight", {qd, h}, base + 0);
                if (c.qkv_bias) lb.param(p + "self_attn.q_proj.bias", {qd}, base + 1);
                add_autocast_input_cast(lb, "q_proj", T * h, autocast);
                lb.linear("q_proj", T, qd, h);
                lb.save(T * h * dt);
                w.layers.push_back(std::move(lb).finish());
            }
            {
                LayerBuilder lb(p + "self_attn.k_proj", blk, dtype);
                lb.param(p + "self_attn.k_proj.weight", {kvd, h}, base + qkv);
                if (c.qkv_bias) lb.param(p + "self_attn.k_proj.bias", {kvd}, base + qkv + 1);
                // Under autocast over fp32 weights each projection casts the fp32
                // norm output itself and keeps its own copy (builders.hpp).
                const bool own_copy = add_autocast_input_cast(lb, "k_proj", T * h, autocast);
                lb.linear("k_proj", T, kvd, h);
                if (own_copy) lb.save(T * h * dt);
                w.layers.push_back(std::move(lb).finish());
            }
            {
                LayerBuilder lb(p + "self_attn.v_proj", blk, dtype);
                lb.param(p + "self_attn.v_proj.weight", {kvd, h}, base + 2 * qkv);
                if (c.qkv_bias) lb.param(p + "self_attn.v_proj.bias", {kvd}, base + 2 * qkv + 1);
                // Under autocast over fp32 weights each projection casts the fp32
                // norm output itself and keeps its own copy (builders.hpp).
                const bool own_copy = add_autocast_input_cast(lb, "v_proj", T * h, autocast);
                lb.linear("v_proj", T, kvd, h);
                if (own_copy) lb.save(T * h * dt);
                w.layers.push_back(std::move(lb).finish());
            }
        }
        {
            LayerBuilder lb(p + "self_attn.core", blk, dtype);
            add_rotary_attention(lb, b, s, a, c.kv_heads, hd, attention);
            w.layers.push_back(std::move(lb).finish());
        }
        {
            LayerBuilder lb(p + "self_attn.o_proj", blk, dtype);
            lb.param(p + "self_attn.o_proj.weight", {h, qd}, base + o_at);
            if (c.o_bias) lb.param(p + "self_attn.o_proj.bias", {h}, base + o_at + 1);
            lb.linear("o_proj", T, h, qd);
            add_residual(lb, T * h, autocast);
            lb.save(T * qd * dt);
            w.layers.push_back(std::move(lb).finish());
        }
        {
            LayerBuilder lb(p + "post_attention_layernorm", blk, dtype);
            lb.param(p + "post_attention_layernorm.weight", {h}, base + norms_at + 1);
            // Gemma-2's sandwich norm reads the attention output (dt), not the stream.
            add_rms_norm(lb, "post_attention_layernorm", T, h, c.sandwich_norms ? Autocast::none : autocast);
            w.layers.push_back(std::move(lb).finish());
        }
        if (c.sandwich_norms) {
            LayerBuilder lb(p + "pre_feedforward_layernorm", blk, dtype);
            lb.param(p + "pre_feedforward_layernorm.weight", {h}, base + norms_at + 2);
            add_rms_norm(lb, "pre_feedforward_layernorm", T, h, autocast);
            w.layers.push_back(std::move(lb).finish());
        }
        if (moe) {
            add_moe(w, c, p, blk, base + mlp_at, T, dtype);
            continue;
        }
        if (fused) {
            LayerBuilder lb(p + "mlp.gate_up_proj", blk, dtype);
            lb.param(p + "mlp.gate_up_proj.weight", {2 * inter, h}, base + mlp_at);
            add_autocast_input_cast(lb, "gate_up_proj", T * h, autocast);
            lb.linear("gate_up_proj", T, 2 * inter, h);
            lb.save(T * h * dt);
            w.layers.push_back(std::move(lb).finish());
        } else {
            {
                LayerBuilder lb(p + "mlp.gate_proj", blk, dtype);
                lb.param(p + "mlp.gate_proj.weight", {inter, h}, base + mlp_at);
                add_autocast_input_cast(lb, "gate_proj", T * h, autocast);
                lb.linear("gate_proj", T, inter, h);
                lb.save(T * h * dt);
                w.layers.push_back(std::move(lb).finish());
            }
            {
                LayerBuilder lb(p + "mlp.up_proj", blk, dtype);
                lb.param(p + "mlp.up_proj.weight", {inter, h}, base + mlp_at + 1);
                // Under autocast over fp32 weights each projection casts the fp32
                // norm output itself and keeps its own copy (builders.hpp).
                const bool own_copy = add_autocast_input_cast(lb, "up_proj", T * h, autocast);
                lb.linear("up_proj", T, inter, h);
                if (own_copy) lb.save(T * h * dt);
                w.layers.push_back(std::move(lb).finish());
            }
        }
        {
            LayerBuilder lb(p + "mlp.down_proj", blk, dtype);
            lb.param(p + "mlp.down_proj.weight", {h, inter}, base + mlp_at + (fused ? 1 : 2));
            add_swiglu(lb, T * inter);
            lb.linear("down_proj", T, h, inter);
            if (!c.sandwich_norms) add_residual(lb, T * h, autocast);
            lb.save(4 * T * inter * dt);
            w.layers.push_back(std::move(lb).finish());
        }
        if (c.sandwich_norms) {
            LayerBuilder lb(p + "post_feedforward_layernorm", blk, dtype);
            lb.param(p + "post_feedforward_layernorm.weight", {h}, base + norms_at + 3);
            add_rms_norm(lb, "post_feedforward_layernorm", T, h);
            add_residual(lb, T * h, autocast);
            w.layers.push_back(std::move(lb).finish());
        }
    }

    const int after = 1 + per_layer * static_cast<int>(c.layers);
    {
        LayerBuilder lb("norm", -1, dtype);
        lb.param("norm.weight", {h}, after);
        add_rms_norm(lb, "norm", T, h, autocast);
        w.layers.push_back(std::move(lb).finish());
    }
    {
        LayerBuilder lb("lm_head", -1, dtype);
        // Tied: the logits reuse embed_tokens.weight, whose gradient sums both uses.
        if (!c.tied_embeddings) lb.param("lm_head.weight", {c.vocab, h}, after + 1);
        if (c.tied_embeddings) add_weight_cast(lb, c.vocab * h, autocast);  // embed_tokens' weight, cast for F.linear
        add_autocast_input_cast(lb, "lm_head", T * h, autocast);
        lb.linear("lm_head", T, c.vocab, h);
        lb.save(T * h * dt);
        w.layers.push_back(std::move(lb).finish());
    }
    {
        LayerBuilder lb("loss", -1, dtype);
        add_upcast_cross_entropy(lb, T, c.vocab);
        w.layers.push_back(std::move(lb).finish());
    }
    add_autocast_weight_casts(w);
    return w;
}

}  // namespace dtsim::models
