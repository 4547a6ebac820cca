#include "dtsim/common/error.hpp"
#include "dtsim/models/model_registry.hpp"
#include "dtsim/models/workload.hpp"

#include "models/workload_queries.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

using namespace dtsim;
using namespace dtsim::models;
using Catch::Matchers::Contains;
using dtsim::test::block_saved_bytes;
using dtsim::test::layer_named;

namespace {

Workload build(const std::string& name, std::int64_t b = 1, std::int64_t s = 0, DType dt = DType::bf16,
               AttentionImpl attention = AttentionImpl::flash) {
    return build_workload(WorkloadRequest{name, b, s, dt, attention});
}

Workload build_eager(const std::string& name, std::int64_t b, std::int64_t s, DType dt = DType::bf16) {
    return build(name, b, s, dt, AttentionImpl::eager);
}

double forward_flops(const Layer& l) {
    double f = 0;
    for (const auto& op : l.forward) f += op.flops;
    return f;
}

const Op& op_named(const std::vector<Op>& ops, const std::string& name) {
    for (const auto& op : ops)
        if (op.name == name) return op;
    FAIL("no op " << name);
    throw;  // unreachable
}

}  // namespace

// Published HuggingFace parameter counts (external facts, not computed here).
TEST_CASE("named models have the published HuggingFace parameter counts") {
    struct Expected {
        const char* name;
        std::int64_t params;
    };
    const std::vector<Expected> expected = {
        {"gpt2", 124'439'808},          {"gpt2-medium", 354'823'168}, {"gpt2-large", 774'030'080},
        {"gpt2-xl", 1'557'611'200},     {"llama2-7b", 6'738'415'616}, {"llama2-13b", 13'015'864'320},
        {"llama2-70b", 68'976'648'192},
        // Code Llama 34B's shape; 33.7 B on its model card, this exact count by
        // hand: 48 x (2 x 8192^2 + 2 x 8192 x 1024 + 3 x 8192 x 22016 + 2 x 8192)
        // + 2 x 32000 x 8192 + 8192.
        {"llama2-34b", 33'743'970'304},
    };
    for (const auto& e : expected) {
        INFO(e.name);
        CHECK(build(e.name, 1, 16).param_count() == e.params);
    }
}

TEST_CASE("MLP parameter counts follow layers x (width^2 + width)") {
    CHECK(build("mlp-3x16").param_count() == 816);
    CHECK(build("mlp-8x2048").param_count() == 33'570'816);
    const Workload w = build("mlp-3x16", 4);
    REQUIRE(w.layers.size() == 4);  // 3 Linear layers + loss
    CHECK(w.layers[0].params[0].name == "layers.0.weight");
    CHECK(w.layers[0].params[0].shape == std::vector<std::int64_t>{16, 16});
    CHECK(w.layers[0].params[1].shape == std::vector<std::int64_t>{16});
    CHECK(w.seq_len == 1);
    CHECK(w.tokens() == 4);
}

TEST_CASE("parameter indices are unique and form 0..P-1 (model.parameters() order)") {
    for (const auto& name : {"gpt2", "gpt2-xl", "llama2-7b", "llama2-70b", "mlp-5x32"}) {
        INFO(name);
        const Workload w = build(name, 1, 1);
        std::vector<int> idx;
        for (const auto& l : w.layers)
            for (const auto& p : l.params) idx.push_back(p.index);
        std::sort(idx.begin(), idx.end());
        for (std::size_t i = 0; i < idx.size(); ++i) REQUIRE(idx[i] == static_cast<int>(i));
    }
}

TEST_CASE("parameter names, shapes and definition-order indices follow HuggingFace") {
    auto find_param = [](const Workload& w, int index) -> Parameter {
        for (const auto& l : w.layers)
            for (const auto& p : l.params)
                if (p.index == index) return p;
        FAIL("no parameter with index " << index);
        return {};
    };
    const Workload g = build("gpt2", 1, 1);
    CHECK(find_param(g, 0).name == "wte.weight");
    CHECK(find_param(g, 1).name == "wpe.weight");
    CHECK(find_param(g, 2).name == "h.0.ln_1.weight");
    CHECK(find_param(g, 4).name == "h.0.attn.c_attn.weight");
    CHECK(find_param(g, 4).shape == std::vector<std::int64_t>{768, 2304});
    CHECK(find_param(g, 13).name == "h.0.mlp.c_proj.bias");
    CHECK(find_param(g, 2 + 12 * 12).name == "ln_f.weight");
    CHECK(layer_named(g, "lm_head").params.empty());  // tied to wte
    CHECK(g.layers.front().name == "wte");
    CHECK(g.layers.back().name == "loss");
    CHECK(g.buffer_bytes() == 0);

    const Workload l = build("llama2-70b", 1, 1);
    CHECK(find_param(l, 0).name == "embed_tokens.weight");
    CHECK(find_param(l, 1).name == "layers.0.self_attn.q_proj.weight");
    CHECK(find_param(l, 2).shape == std::vector<std::int64_t>{1024, 8192});  // GQA k_proj
    CHECK(find_param(l, 8).name == "layers.0.input_layernorm.weight");
    CHECK(find_param(l, 9).name == "layers.0.post_attention_layernorm.weight");
    CHECK(find_param(l, 1 + 9 * 80).name == "norm.weight");
    CHECK(find_param(l, 2 + 9 * 80).name == "lm_head.weight");
    CHECK(find_param(l, 2 + 9 * 80).shape == std::vector<std::int64_t>{32000, 8192});
    // Forward order differs from definition order: input_layernorm (index 8) runs before q_proj (1).
    CHECK(l.layers[1].name == "layers.0.input_layernorm");
    CHECK(l.layers[2].name == "layers.0.self_attn.q_proj");
}

TEST_CASE("gemm_backward gives dgrad and wgrad of the right shapes, 2x the forward flops") {
    const Op f = make_gemm("fc", 64, 32, 16, 3, DType::fp16);
    CHECK(f.flops == 2.0 * 64 * 32 * 16 * 3);
    const auto bwd = gemm_backward(f);
    REQUIRE(bwd.size() == 2);
    const Op& dA = bwd[0];
    const Op& dB = bwd[1];
    CHECK(dA.name == "fc.dgrad");
    CHECK((dA.m == 64 && dA.n == 16 && dA.k == 32));
    CHECK(dB.name == "fc.wgrad");
    CHECK((dB.m == 16 && dB.n == 32 && dB.k == 64));
    for (const Op& op : bwd) {
        CHECK(op.kind == OpKind::gemm);
        CHECK(op.batch == 3);
        CHECK(op.dtype == DType::fp16);
    }
    CHECK(dA.flops + dB.flops == 2 * f.flops);

    const auto first = gemm_backward(f, false);
    REQUIRE(first.size() == 1);
    CHECK(first[0].name == "fc.wgrad");
}

TEST_CASE("layer backward is its ops' backward in reverse, and the MLP's first layer has no input gradient") {
    const Workload w = build("mlp-3x16", 2);
    const Layer& l0 = w.layers[0];
    REQUIRE(l0.forward.size() == 2);   // linear, relu
    REQUIRE(l0.backward.size() == 2);  // relu.bwd, linear.wgrad
    CHECK(l0.backward[0].name == "relu.bwd");
    CHECK(l0.backward[1].name == "linear.wgrad");
    const Layer& l1 = w.layers[1];
    REQUIRE(l1.backward.size() == 3);
    CHECK(l1.backward[1].name == "linear.dgrad");
    CHECK(w.layers.back().forward.at(0).kind == OpKind::loss);

    const Workload g = build_eager("gpt2", 2, 64);
    const Layer& c_attn = layer_named(g, "h.0.attn.c_attn");
    REQUIRE(c_attn.forward.size() == 1);
    CHECK((c_attn.forward[0].m == 128 && c_attn.forward[0].n == 2304 && c_attn.forward[0].k == 768));
    CHECK(c_attn.forward[0].dtype == DType::bf16);
    const Layer& core = layer_named(g, "h.3.attn.core");
    CHECK(core.block == 3);
    CHECK(core.params.empty());
    const Op& qk = core.forward.at(0);
    CHECK((qk.batch == 2 * 12 && qk.m == 64 && qk.n == 64 && qk.k == 64));
    CHECK(core.backward.back().name == "qk.wgrad");
    CHECK(layer_named(g, "lm_head").backward.size() == 2);  // dgrad + wgrad (into wte's gradient)
}

TEST_CASE("model flops sum the ops, and training flops per token of gpt2 lie in [6P, 9.6P]") {
    const Workload w = build("gpt2", 1, 1024);
    double fwd = 0;
    for (const auto& l : w.layers)
        for (const auto& op : l.forward) fwd += op.flops;
    CHECK(w.forward_flops() == Approx(fwd));
    // Flash attention's QK^T recompute is priced but is not model flops.
    CHECK(w.recompute_flops() > 0);
    CHECK(w.model_flops() == Approx(w.forward_flops() + w.backward_flops() - w.recompute_flops()));
    CHECK(build_eager("gpt2", 1, 1024).recompute_flops() == 0);

    const double p = static_cast<double>(w.param_count());
    const double per_token = w.model_flops() / 1024.0;
    CHECK(per_token >= 6 * p);
    CHECK(per_token <= 6 * p * 1.6);

    const auto infos = list_models();
    const auto it = std::find_if(infos.begin(), infos.end(), [](const ModelInfo& i) { return i.name == "gpt2"; });
    REQUIRE(it != infos.end());
    CHECK(it->param_count == w.param_count());
    CHECK(it->default_seq_len == 1024);
    CHECK(it->training_flops_per_token == Approx(per_token));
}

TEST_CASE("GPT-2 block saved activations: Korthikanti et al.'s 34sbh + 5as^2b plus gelu_new's 24sbh (16-bit, eager)") {
    const std::int64_t b = 2, s = 128, h = 768, a = 12;
    // Korthikanti et al. count one GELU input. HF's gelu_new, written out in
    // torch, also keeps tanh's output and the final product's operands (0.5x,
    // 1 + tanh): three more tensors of the MLP's width 4h, 3 * 2 * 4sbh bytes.
    const std::int64_t gelu_extra16 = 3 * 2 * 4 * s * b * h;
    const Workload w = build_eager("gpt2", b, s, DType::bf16);
    for (int block : {0, 5, 11}) {
        INFO("block " << block);
        CHECK(block_saved_bytes(w, block) == 34 * s * b * h + 5 * a * s * s * b + gelu_extra16);
    }
    // fp32: tensors double, the three 1-byte dropout masks (as^2b + 2sbh) do not.
    const Workload w32 = build_eager("gpt2", b, s, DType::fp32);
    CHECK(block_saved_bytes(w32, 0) ==
          2 * (32 * s * b * h + 4 * a * s * s * b) + 2 * s * b * h + a * s * s * b + 2 * gelu_extra16);
}

TEST_CASE("Llama block saved activations: 24sbh + 8sbi + 2as^2b + 8sb (16-bit, no dropout, eager)") {
    const std::int64_t b = 1, s = 256, h = 4096, a = 32, i = 11008;
    // HuggingFace's eager RMSNorm: autograd keeps x.to(float32) (pow and the
    // rsqrt multiply read it), the rsqrt per row (fp32) and the cast-back output
    // (the weight multiply's other operand): 4sbh + 2sbh + 4sb bytes per norm,
    // two norms per block, in place of the 2sbh of a fused norm's input.
    const std::int64_t norm16 = 4 * s * b * h + 2 * s * b * h + 4 * s * b;
    const Workload w = build_eager("llama2-7b", b, s, DType::fp16);
    CHECK(block_saved_bytes(w, 0) == 12 * s * b * h + 2 * norm16 + 8 * s * b * i + 2 * a * s * s * b);
    // fp32: the casts are no-ops, so a norm keeps x and its output, 4 bytes each.
    const std::int64_t norm32 = 8 * s * b * h + 4 * s * b;
    const Workload w32 = build_eager("llama2-7b", b, s, DType::fp32);
    CHECK(block_saved_bytes(w32, 31) == 2 * (block_saved_bytes(w, 31) - 2 * norm16) + 2 * norm32);
}

namespace {

struct KernelCount {
    int kernels = 0;
    std::int64_t bytes = 0, indexed = 0;
};

KernelCount count(const std::vector<Op>& ops, const std::string& prefix) {
    KernelCount k;
    for (const Op& op : ops)
        if (op.name.starts_with(prefix)) {
            k.kernels += op.kernels;
            k.bytes += op.bytes;
            k.indexed += op.indexed_elements;
        }
    return k;
}

}  // namespace

TEST_CASE("Llama RMSNorm runs torch's eager kernels: 8 forward, 15 backward, 3 of each broadcast or casting") {
    // LlamaRMSNorm.forward: x.to(float32); pow(2); mean(-1); + eps; rsqrt;
    // x * rsqrt (broadcast); .to(bf16); weight * x (broadcast), as the Kineto
    // trace of a real block lists them (bench/results/cuda.md).
    const std::int64_t b = 2, s = 64, h = 4096, E = b * s * h;
    const Workload w = build("llama2-7b", b, s, DType::bf16);
    const Layer& norm = layer_named(w, "layers.3.input_layernorm");
    const KernelCount f = count(norm.forward, "input_layernorm");
    CHECK(f.kernels == 8);
    // cast 2+4, pow 4+4, mean 4, x*rsqrt 4+4, cast back 4+2, weight*x 2+2 bytes per element
    CHECK(f.bytes == (6 + 8 + 4 + 8 + 6 + 4) * E + 16 * b * s);
    CHECK(f.indexed == 3 * E);  // the fp32 cast, x*rsqrt and weight*x
    const KernelCount g = count(norm.backward, "input_layernorm");
    CHECK(g.kernels == 15);
    CHECK(g.indexed == 4 * E);  // grad*weight, the cast, grad*rsqrt, mean's expand
    // fp32 activations: no casts.
    const Workload w32 = build("llama2-7b", b, s, DType::fp32);
    const Layer& norm32 = layer_named(w32, "layers.3.input_layernorm");
    CHECK(count(norm32.forward, "input_layernorm").kernels == 6);
    CHECK(count(norm32.backward, "input_layernorm").kernels == 13);
    CHECK(count(norm32.forward, "input_layernorm").indexed == 2 * E);
}

TEST_CASE("Llama rotary runs 5 strided kernels per tensor forward, 6 backward, on q at full and k at kv width") {
    // q * cos + rotate_half(q) * sin: mul, neg (half), cat, mul, add; backward
    // the same and a copy back to the projection's layout.
    const std::int64_t b = 2, s = 64, h = 8192, a = 64, kvd = 8 * (h / a);
    const Workload w = build("llama2-70b", b, s, DType::bf16);
    const Layer& core = layer_named(w, "layers.0.self_attn.core");
    const KernelCount q = count(core.forward, "rotary.q");
    const KernelCount k = count(core.forward, "rotary.k");
    CHECK(q.kernels == 5);
    CHECK(q.indexed == 9 * b * s * h / 2);
    CHECK(k.indexed == 9 * b * s * kvd / 2);
    CHECK(count(core.backward, "rotary.q").kernels == 6);
    CHECK(count(core.backward, "rotary.k").indexed == 11 * b * s * kvd / 2);
    // SDPA writes (b, s, heads, head_dim): no head-merge copy with flash.
    CHECK(count(core.forward, "merge_heads").kernels == 0);
    CHECK(count(layer_named(build_eager("llama2-70b", b, s), "layers.0.self_attn.core").forward, "merge_heads")
              .kernels == 1);
}

TEST_CASE("SwiGLU backward is three kernels (two muls, silu_backward), and the loss upcasts the logits to fp32") {
    const std::int64_t b = 2, s = 64, i = 11008, vocab = 32000, T = b * s;
    const Workload w = build("llama2-7b", b, s, DType::bf16);
    const Layer& down = layer_named(w, "layers.0.mlp.down_proj");
    CHECK(count(down.backward, "mul.bwd").kernels == 2);
    CHECK(count(down.backward, "mul.bwd").bytes == 2 * 3 * 2 * T * i);
    CHECK(count(down.backward, "silu.bwd").bytes == 3 * 2 * T * i);
    const Layer& loss = layer_named(w, "loss");
    const KernelCount f = count(loss.forward, "");
    CHECK(f.indexed == T * vocab);                        // logits.float(): a casting copy
    CHECK(f.bytes == (2 + 4) * T * vocab + 16 * T * vocab);  // the cast, then log_softmax's passes
    CHECK(loss.saved_activation_bytes == 4 * T * vocab);     // the fp32 log-softmax output
}

TEST_CASE("GPT-2's gelu_new runs torch's 8 vectorized kernels forward and 11 backward") {
    // pow, mul, add, mul, tanh, add, mul, mul as the H100 trace lists them: six of
    // one operand (read + write, 2 + 2 bytes in bf16) and two of two (6): 36 bytes
    // per element forward; backward 4 two-operand products (6), 4 scalar muls and
    // a pow (4), two add_ (6): 56 bytes.
    const std::int64_t b = 2, s = 64, h = 1600, E = b * s * 4 * h;
    const Workload w = build("gpt2-xl", b, s, DType::bf16);
    const Layer& fc = layer_named(w, "h.7.mlp.c_fc");
    const KernelCount f = count(fc.forward, "gelu_new");
    const KernelCount g = count(fc.backward, "gelu_new");
    CHECK(f.kernels == 8);
    CHECK(f.bytes == (6 * 4 + 2 * 6) * E);
    CHECK(g.kernels == 11);
    CHECK(g.bytes == (4 * 6 + 5 * 4 + 2 * 6) * E);
    CHECK(f.indexed == 0);
}

TEST_CASE("flash attention: a GPT-2 block saves the eager total with the s^2 terms replaced") {
    const std::int64_t b = 2, s = 128, h = 768, a = 12;
    for (DType dt : {DType::bf16, DType::fp16, DType::fp32}) {
        INFO(to_string(dt));
        const std::int64_t e = dtype_bytes(dt);
        const std::int64_t sbh = s * b * h;
        const std::int64_t s2 = a * s * s * b;
        // Eager attn.core: Q, K, V; softmax and dropout outputs; the 1-byte dropout mask.
        const std::int64_t eager_core = 3 * sbh * e + 2 * s2 * e + s2;
        // Flash attn.core: Q, K, V and the output O; fp32 log-sum-exp per (batch, head, row); no mask.
        const std::int64_t flash_core = 4 * sbh * e + 4 * a * s * b;
        const Workload eager = build_eager("gpt2", b, s, dt);
        const Workload flash = build("gpt2", b, s, dt);
        CHECK(flash.attention == AttentionImpl::flash);
        CHECK(eager.attention == AttentionImpl::eager);
        for (int block : {0, 11}) {
            INFO("block " << block);
            // and c_proj reads O itself (SDPA writes it in (b, s, heads, head_dim)
            // order, so HF's transpose(1, 2).contiguous() is a view), not a merged copy.
            CHECK(block_saved_bytes(flash, block) ==
                  block_saved_bytes(eager, block) - eager_core + flash_core - sbh * e);
        }
        CHECK(layer_named(flash, "h.4.attn.core").saved_activation_bytes == flash_core);
    }
    // 16-bit: 58sbh + 5as^2b becomes 58sbh + 4asb (gelu_new's 24sbh in both).
    CHECK(block_saved_bytes(build("gpt2", b, s), 3) == 58 * s * b * h + 4 * a * s * b);
}

TEST_CASE("flash attention: half the eager core GEMM flops, no s^2 traffic, saved bytes linear in s") {
    const std::int64_t b = 2, s = 256, h = 768, a = 12, hd = h / a;
    const Workload eager = build_eager("gpt2", b, s);
    const Workload flash = build("gpt2", b, s);
    const Layer& ec = layer_named(eager, "h.0.attn.core");
    const Layer& fc = layer_named(flash, "h.0.attn.core");
    CHECK(forward_flops(fc) < forward_flops(ec));
    CHECK(flash.forward_flops() < eager.forward_flops());

    const Op& qk = op_named(fc.forward, "flash.qk");
    CHECK((qk.kind == OpKind::gemm && qk.m == s && qk.n == s / 2 && qk.k == hd && qk.batch == b * a));
    const Op& av = op_named(fc.forward, "flash.av");
    CHECK((av.kind == OpKind::gemm && av.m == s && av.n == hd && av.k == s / 2 && av.batch == b * a));
    CHECK(qk.flops + av.flops == Approx(0.5 * (op_named(ec.forward, "qk").flops + op_named(ec.forward, "av").flops)));
    // No elementwise op touches the s x s scores: all of them are O(b*s*h) bytes.
    for (const auto* ops : {&fc.forward, &fc.backward})
        for (const Op& op : *ops) {
            INFO(op.name);
            if (op.kind != OpKind::gemm) CHECK(op.bytes <= 2 * b * s * h * dtype_bytes(DType::bf16));
        }
    // Backward: 4 gradient GEMMs + the QK^T recompute (forward shape, marked recompute).
    int gemms = 0;
    for (const Op& op : fc.backward) gemms += op.kind == OpKind::gemm ? 1 : 0;
    CHECK(gemms == 5);
    const Op& rc = op_named(fc.backward, "flash.qk.recompute");
    CHECK((rc.m == qk.m && rc.n == qk.n && rc.k == qk.k && rc.batch == qk.batch && rc.recompute));
    CHECK(op_named(fc.backward, "flash.av.dgrad").flops + op_named(fc.backward, "flash.av.wgrad").flops ==
          Approx(2 * av.flops));
    CHECK(fc.backward.back().name == "flash.qk.wgrad");

    // Doubling s doubles a flash block's saved bytes exactly (no s^2 term); eager grows faster.
    for (const auto& name : {"gpt2", "llama2-7b", "llama2-70b"}) {
        INFO(name);
        CHECK(block_saved_bytes(build(name, 2, 512), 0) == 2 * block_saved_bytes(build(name, 2, 256), 0));
        CHECK(block_saved_bytes(build_eager(name, 2, 512), 0) > 2 * block_saved_bytes(build_eager(name, 2, 256), 0));
    }
}

TEST_CASE("flash attention in Llama with GQA saves K and V at kv-head width and skips repeat_kv") {
    const std::int64_t b = 2, s = 64, h = 8192, a = 64, kvd = 8 * (h / a), i = 28672;
    const Workload w = build("llama2-70b", b, s, DType::bf16);
    const Layer& core = layer_named(w, "layers.0.self_attn.core");
    CHECK(core.saved_activation_bytes == (2 * s * b * h + 2 * s * b * kvd) * 2 + 4 * a * s * b);
    for (const Op& op : core.forward) CHECK(op.name != "repeat_kv");
    // Two eager RMSNorms keep 6sbh + 4sb bytes each (the test above).
    CHECK(block_saved_bytes(w, 0) ==
          10 * s * b * h + 2 * (6 * s * b * h + 4 * s * b) + 4 * s * b * kvd + 8 * s * b * i + 4 * a * s * b);
    bool eager_repeats = false;
    const Workload eager = build_eager("llama2-70b", b, s);
    for (const Op& op : layer_named(eager, "layers.0.self_attn.core").forward)
        eager_repeats = eager_repeats || op.name == "repeat_kv";
    CHECK(eager_repeats);
}

TEST_CASE("attention implementation names: flash, sdpa (= flash), eager") {
    CHECK(attention_from_string("flash") == AttentionImpl::flash);
    CHECK(attention_from_string("sdpa") == AttentionImpl::flash);
    CHECK(attention_from_string("eager") == AttentionImpl::eager);
    CHECK(to_string(AttentionImpl::flash) == "flash");
    CHECK(to_string(AttentionImpl::eager) == "eager");
    CHECK(WorkloadRequest{}.attention == AttentionImpl::flash);
    CHECK_THROWS_AS(attention_from_string("flash2"), ConfigError);
    CHECK_THROWS_WITH(attention_from_string("flash2"), Contains("eager") && Contains("flash") && Contains("flash2"));
    // MLPs have no attention: both choices build the same workload.
    CHECK(build("mlp-3x16", 4, 0, DType::fp32, AttentionImpl::eager).model_flops() ==
          build("mlp-3x16", 4, 0, DType::fp32).model_flops());
}

TEST_CASE("MLP saved activations: each Linear its input, each ReLU its output") {
    const Workload w = build("mlp-3x16", 4, 0, DType::fp32);
    CHECK(w.layers[0].saved_activation_bytes == 2 * 4 * 16 * 4);
    CHECK(w.layers[2].saved_activation_bytes == 4 * 16 * 4);  // last Linear: no ReLU
}

TEST_CASE("seq_len 0 selects the model default") {
    CHECK(build("gpt2").seq_len == 1024);
    CHECK(build("llama2-13b", 1, 0).seq_len == 4096);
    CHECK(build("mlp-2x8").seq_len == 1);
    CHECK(build("gpt2-medium", 3, 100).tokens() == 300);
}

TEST_CASE("an unknown model is a ConfigError listing the valid names") {
    CHECK_THROWS_AS(build("gtp2"), ConfigError);
    CHECK_THROWS_WITH(build("gtp2"), Contains("gpt2-xl") && Contains("mlp-<layers>x<width>"));
    CHECK_THROWS_WITH(build("llama4-8b"), Contains("llama2-70b") && Contains("llama3-8b"));
    const auto names = model_names();
    CHECK(names.size() == list_models().size());
    CHECK(std::find(names.begin(), names.end(), "gpt2-xl") != names.end());
}

TEST_CASE("a malformed MLP name is a ConfigError that states the expected form") {
    for (const auto& bad : {"mlp-0x10", "mlp-3", "mlp-ax4", "mlp-3x", "mlp-x4", "mlp-3x0", "mlp-", "mlp-2x3x4",
                            "mlp--1x4", "mlp-99999999999999x4"}) {
        INFO(bad);
        CHECK_THROWS_AS(build(bad), ConfigError);
        CHECK_THROWS_WITH(build(bad), Contains("mlp-<layers>x<width>"));
    }
    CHECK_NOTHROW(build("mlp-1x1"));
}

TEST_CASE("micro_batch and seq_len out of range are ConfigErrors naming the value and the limit") {
    CHECK_THROWS_AS(build("gpt2", 1, 1025), ConfigError);
    CHECK_THROWS_WITH(build("gpt2", 1, 1025), Contains("1025") && Contains("1024"));
    CHECK_THROWS_WITH(build("gpt2-xl", 1, -1), Contains("-1") && Contains("1024"));
    CHECK_THROWS_WITH(build("llama2-7b", 1, 4097), Contains("4097") && Contains("4096"));
    CHECK_NOTHROW(build("llama2-7b", 1, 4096));
    CHECK_NOTHROW(build("gpt2", 1, 1024));
    CHECK_THROWS_AS(build("mlp-2x8", 1, 2), ConfigError);
    CHECK_THROWS_WITH(build("mlp-2x8", 1, 2), Contains("seq_len 2"));
    CHECK_NOTHROW(build("mlp-2x8", 1, 1));
    CHECK_THROWS_AS(build("gpt2", 0, 16), ConfigError);
    CHECK_THROWS_WITH(build("gpt2", 0, 16), Contains("micro_batch 0"));
    CHECK_THROWS_AS(build("mlp-2x8", -3), ConfigError);
}

TEST_CASE("building is deterministic") {
    const Workload a = build("llama2-70b", 2, 64);
    const Workload b = build("llama2-70b", 2, 64);
    REQUIRE(a.layers.size() == b.layers.size());
    for (std::size_t i = 0; i < a.layers.size(); ++i) {
        REQUIRE(a.layers[i].name == b.layers[i].name);
        REQUIRE(a.layers[i].forward.size() == b.layers[i].forward.size());
        REQUIRE(a.layers[i].backward.size() == b.layers[i].backward.size());
        REQUIRE(a.layers[i].saved_activation_bytes == b.layers[i].saved_activation_bytes);
    }
    CHECK(a.model_flops() == b.model_flops());
}

TEST_CASE("GEMMs carry the layouts torch hands the BLAS: nn.Linear NT, HF GPT-2's Conv1D NN, Q K^T NT") {
    auto layout_of = [](const Workload& w, const std::string& layer, const std::string& op) {
        const Layer& l = layer_named(w, layer);
        for (const auto* ops : {&l.forward, &l.backward})
            for (const auto& o : *ops)
                if (o.name == op) return o.layout;
        FAIL("no op " << op << " in " << layer);
        throw;  // unreachable
    };
    const Workload mlp = build("mlp-2x64", 8, 1, DType::fp32);
    CHECK(layout_of(mlp, mlp.layers[1].name, "linear") == GemmLayout::nt);
    CHECK(layout_of(mlp, mlp.layers[1].name, "linear.dgrad") == GemmLayout::nn);
    CHECK(layout_of(mlp, mlp.layers[1].name, "linear.wgrad") == GemmLayout::tn);

    const Workload gpt2 = build_eager("gpt2", 1, 64);
    CHECK(layout_of(gpt2, "h.0.attn.c_attn", "c_attn") == GemmLayout::nn);  // x W, W stored in x out
    CHECK(layout_of(gpt2, "h.0.attn.c_attn", "c_attn.dgrad") == GemmLayout::nt);
    CHECK(layout_of(gpt2, "h.0.attn.c_attn", "c_attn.wgrad") == GemmLayout::tn);
    CHECK(layout_of(gpt2, "lm_head", "lm_head") == GemmLayout::nt);
    CHECK(layout_of(gpt2, "h.0.attn.core", "qk") == GemmLayout::nt);
    CHECK(layout_of(gpt2, "h.0.attn.core", "av") == GemmLayout::nn);

    const Workload llama = build("llama2-7b", 1, 64);
    CHECK(layout_of(llama, "layers.0.self_attn.q_proj", "q_proj") == GemmLayout::nt);
    CHECK(layout_of(llama, "layers.0.mlp.down_proj", "down_proj.wgrad") == GemmLayout::tn);
}
