// GPT-2 (HuggingFace GPT2LMHeadModel), module-granular, with either attention
// implementation (AttentionImpl: flash = HuggingFace's default "sdpa", or eager).
//
// Layers in forward order: wte, wpe (+ position add + embedding dropout), then
// per block h.<i>: ln_1, attn.c_attn, attn.core (no parameters; eager: QK^T,
// scale+mask+softmax, attention dropout, AV, head merge; flash: the fused
// kernel of add_flash_attention in workload.cpp, dropout inside it, then the
// head merge), attn.c_proj (+ dropout, residual add), ln_2, mlp.c_fc (+ GELU),
// mlp.c_proj (+ dropout, residual add); then ln_f, lm_head (tied to wte: no
// parameters of its own, but its weight-gradient GEMM accumulates into wte's
// gradient, which is therefore complete only when wte's backward ends), loss
// (cross-entropy over logits).
//
// Parameter names follow GPT2Model (no "transformer." prefix); Conv1D weights
// are [in, out]. Indices follow model.parameters(): wte, wpe, per block the 12
// tensors in module order, ln_f.
//
// Saved activations with eager attention (Korthikanti et al. 2022, Sec. 4.1),
// per block in 16-bit activations, split as
//   ln_1        input                                   2sbh
//   attn.c_attn input                                   2sbh
//   attn.core   Q and K (QK^T) 4sbh, softmax output 2as^2b, dropout mask as^2b,
//               dropout output 2as^2b and V (AV) 2sbh    6sbh + 5as^2b
//   attn.c_proj input 2sbh + dropout mask sbh           3sbh
//   ln_2        input                                   2sbh
//   mlp.c_fc    input 2sbh + GELU input 8sbh            10sbh
//               + gelu_new's eager intermediates (tanh's output, 0.5x and
//               1 + tanh: eager_ops.cpp)                 24sbh
//   mlp.c_proj  input 8sbh + dropout mask sbh           9sbh
// Korthikanti et al. count one GELU input; HF's gelu_new, written out in torch,
// keeps three more tensors of the MLP's width, so a block saves 58*s*b*h +
// 5*a*s^2*b. With flash attention attn.core saves Q, K, V and the output O
// (8sbh) plus the fp32 log-sum-exp (4asb) instead of 6sbh + 5as^2b, and
// c_proj's input is that O (no merge copy), so a block saves 58*s*b*h +
// 4*a*s*b bytes: linear in s.
// Under torch.autocast (Autocast in workload.hpp) the norms output fp32 and
// keep the residual stream (fp32 over fp32 weights), and gelu_new runs fp32
// from pow on (eager_ops.cpp): 86sbh + 16sb + 4asb over fp32 weights, as torch
// 2.11's memory history on an H100 shows (tests/models/test_autocast.cpp).
// Tensors are counted at dtype_bytes(activation dtype), dropout masks at one
// byte per element (so fp32 doubles the tensor parts only). Outside blocks:
// wte the token ids (int64), wpe the position ids (int64) and the embedding
// dropout mask, ln_f and lm_head their inputs, the loss its log-softmax
// output (b*s*vocab).
#include "builders.hpp"

#include <fmt/format.h>

namespace dtsim::models {

Workload build_gpt2(const std::string& name, const Gpt2Config& c, std::int64_t micro_batch, std::int64_t seq_len,
                    DType activation_dtype, AttentionImpl attention, Autocast autocast) {
    Workload w = empty_workload(name, micro_batch, seq_len, activation_dtype, attention);
    w.autocast = autocast;
    w.block_class = "transformers.models.gpt2.modeling_gpt2.GPT2Block";

    const std::int64_t b = micro_batch;
    const std::int64_t s = seq_len;
    const std::int64_t h = c.hidden;
    const std::int64_t a = c.heads;
    const std::int64_t hd = h / a;
    const std::int64_t inner = 4 * h;
    const std::int64_t T = b * s;           // tokens
    const std::int64_t S2 = b * a * s * s;  // attention-score elements
    const std::int64_t dt = dtype_bytes(activation_dtype);
    const DType dtype = activation_dtype;
    // The residual stream's bytes: fp32 under autocast over fp32 weights (the
    // embeddings are fp32), else the activation dtype.
    const std::int64_t rdt = autocast == Autocast::fp32_weights ? 4 : dt;
    auto d = [](std::int64_t x) { return static_cast<double>(x); };
    namespace fpe = flops_per_element;

    int index = 0;
    {
        LayerBuilder lb("wte", -1, dtype);
        lb.param("wte.weight", {c.vocab, h}, index++);
        add_embedding(lb, "wte", T, h);
        lb.save(8 * T);
        w.layers.push_back(std::move(lb).finish());
    }
    {
        LayerBuilder lb("wpe", -1, dtype);
        lb.param("wpe.weight", {c.positions, h}, index++);
        add_embedding(lb, "wpe", s, h);  // position ids are [1, s], broadcast over the batch
        lb.elementwise("add", (2 * T * h + s * h) * rdt, fpe::add * d(T * h));
        lb.elementwise("drop", 2 * T * h * rdt + T * h, fpe::dropout * d(T * h));
        lb.save(8 * s + T * h);
        w.layers.push_back(std::move(lb).finish());
    }

    for (std::int64_t i = 0; i < c.layers; ++i) {
        const std::string p = fmt::format("h.{}.", i);
        const int blk = static_cast<int>(i);
        {
            LayerBuilder lb(p + "ln_1", blk, dtype);
            lb.param(p + "ln_1.weight", {h}, index++);
            lb.param(p + "ln_1.bias", {h}, index++);
            add_layer_norm(lb, "ln_1", T, h, autocast);
            w.layers.push_back(std::move(lb).finish());
        }
        {
            LayerBuilder lb(p + "attn.c_attn", blk, dtype);
            lb.param(p + "attn.c_attn.weight", {h, 3 * h}, index++);
            lb.param(p + "attn.c_attn.bias", {3 * h}, index++);
            lb.gemm("c_attn", T, 3 * h, h);  // HF's Conv1D: x W with W stored in x out, an NN GEMM
            lb.save(T * h * dt);
            w.layers.push_back(std::move(lb).finish());
        }
        {
            LayerBuilder lb(p + "attn.core", blk, dtype);
            if (attention == AttentionImpl::eager) {
                lb.gemm("qk", s, s, hd, b * a, true, GemmLayout::nt);  // Q K^T
                lb.elementwise("softmax", 2 * S2 * dt, fpe::softmax * d(S2));  // scale + causal mask + softmax
                lb.elementwise("attn_dropout", 2 * S2 * dt + S2, fpe::dropout * d(S2));
                lb.gemm("av", s, hd, s, b * a);
                lb.save(3 * T * h * dt + 2 * S2 * dt + S2);  // Q, K, V; softmax out, dropout out; mask
                lb.elementwise("merge_heads", 2 * T * h * dt, 0);  // permute(...).contiguous()
            } else {
                // SDPA writes its output in (b, s, heads, head_dim) order, so
                // HF's transpose(1, 2).contiguous() is a view: no merge copy,
                // and c_proj's input is the output O the kernel saves.
                add_flash_attention(lb, b, s, a, a, hd);
            }
            w.layers.push_back(std::move(lb).finish());
        }
        {
            LayerBuilder lb(p + "attn.c_proj", blk, dtype);
            lb.param(p + "attn.c_proj.weight", {h, h}, index++);
            lb.param(p + "attn.c_proj.bias", {h}, index++);
            lb.gemm("c_proj", T, h, h);
            lb.elementwise("resid_dropout", 2 * T * h * dt + T * h, fpe::dropout * d(T * h));
            add_residual(lb, T * h, autocast);
            lb.save((attention == AttentionImpl::eager ? T * h * dt : 0) + T * h);
            w.layers.push_back(std::move(lb).finish());
        }
        {
            LayerBuilder lb(p + "ln_2", blk, dtype);
            lb.param(p + "ln_2.weight", {h}, index++);
            lb.param(p + "ln_2.bias", {h}, index++);
            add_layer_norm(lb, "ln_2", T, h, autocast);
            w.layers.push_back(std::move(lb).finish());
        }
        {
            LayerBuilder lb(p + "mlp.c_fc", blk, dtype);
            lb.param(p + "mlp.c_fc.weight", {h, inner}, index++);
            lb.param(p + "mlp.c_fc.bias", {inner}, index++);
            lb.gemm("c_fc", T, inner, h);
            add_gelu_new(lb, T * inner, autocast);  // kernel by kernel, as torch runs HF's gelu_new
            // c_fc's input; and its output, which gelu_new's pow keeps unless
            // autocast hands pow an fp32 copy instead (eager_ops.cpp).
            lb.save(T * h * dt + (autocast == Autocast::none ? T * inner * dt : 0));
            w.layers.push_back(std::move(lb).finish());
        }
        {
            LayerBuilder lb(p + "mlp.c_proj", blk, dtype);
            lb.param(p + "mlp.c_proj.weight", {inner, h}, index++);
            lb.param(p + "mlp.c_proj.bias", {h}, index++);
            lb.gemm("c_proj", T, h, inner);
            lb.elementwise("dropout", 2 * T * h * dt + T * h, fpe::dropout * d(T * h));
            add_residual(lb, T * h, autocast);
            lb.save(T * inner * dt + T * h);
            w.layers.push_back(std::move(lb).finish());
        }
    }

    {
        LayerBuilder lb("ln_f", -1, dtype);
        lb.param("ln_f.weight", {h}, index++);
        lb.param("ln_f.bias", {h}, index++);
        add_layer_norm(lb, "ln_f", T, h, autocast);
        w.layers.push_back(std::move(lb).finish());
    }
    {
        LayerBuilder lb("lm_head", -1, dtype);  // weight tied to wte.weight
        add_weight_cast(lb, c.vocab * h, autocast);  // autocast casts wte's weight for F.linear
        lb.linear("lm_head", T, c.vocab, h);  // nn.Linear
        lb.save(T * h * dt);
        w.layers.push_back(std::move(lb).finish());
    }
    {
        LayerBuilder lb("loss", -1, dtype);
        add_upcast_cross_entropy(lb, T, c.vocab);  // HF's ForCausalLMLoss: logits.float(), then cross_entropy
        w.layers.push_back(std::move(lb).finish());
    }
    add_autocast_weight_casts(w);
    return w;
}

}  // namespace dtsim::models
