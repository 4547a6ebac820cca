// torch.autocast's dtypes in the HuggingFace builders (workload.hpp: Autocast).
// The expected bytes are worked out here from torch's autograd rules, op by
// op, and agree with torch 2.11's memory history of GPT2LMHeadModel and
// LlamaForCausalLM under autocast(bf16) on an H100 (bench/results/cuda_hf_step.md):
//   - layer_norm and pow are on autocast's fp32 list; matmuls cast their
//     inputs to bf16, each its own copy (the cast cache holds parameters only);
//   - fp32 embeddings make the residual stream fp32 under fp32 weights.
#include "dtsim/models/model_registry.hpp"
#include "models/workload_queries.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace dtsim;
using namespace dtsim::models;
using dtsim::test::block_saved_bytes;
using dtsim::test::layer_named;

namespace {

Workload build(const std::string& name, std::int64_t b, std::int64_t s, Autocast autocast) {
    WorkloadRequest r{name, b, s, DType::bf16, AttentionImpl::flash};
    r.autocast = autocast;
    return build_workload(r);
}

}  // namespace

TEST_CASE("autocast over fp32 weights: a GPT-2 block saves what torch's autograd keeps") {
    const std::int64_t b = 2, s = 128, h = 768, a = 12;
    const std::int64_t sbh = s * b * h, sb = s * b, E4 = 4 * sbh;
    // ln_1 and ln_2: their fp32 input (the residual stream) and fp32 mean and rstd.
    const std::int64_t norms = 2 * (4 * sbh + 8 * sb);
    // c_attn: its bf16 cast of ln_1's fp32 output. The core (SDPA): Q, K, V and
    // O in bf16, the fp32 log-sum-exp; c_proj reads O itself. Its dropout: a mask.
    const std::int64_t attention = 2 * sbh + 8 * sbh + 4 * a * s * b + sbh;
    // c_fc: its bf16 input cast. gelu_new: pow's fp32 copy of x, tanh's output
    // and 1 + tanh (fp32), 0.5x (bf16); c_fc's own bf16 output is kept by no one.
    // mlp.c_proj: its bf16 cast of gelu's fp32 output, and the dropout mask.
    const std::int64_t mlp = 2 * sbh + (4 + 4 + 4 + 2) * E4 + 2 * E4 + sbh;
    const Workload w = build("gpt2", b, s, Autocast::fp32_weights);
    CHECK(w.autocast == Autocast::fp32_weights);
    for (int block : {0, 11}) {
        INFO("block " << block);
        CHECK(block_saved_bytes(w, block) == norms + attention + mlp);
    }
    // That is 86sbh (+16sb, +4asb); without autocast the block saves 58sbh:
    // bf16 norms' inputs (2sbh each) and gelu_new's bf16 chain, which keeps c_fc's output.
    CHECK(block_saved_bytes(w, 3) == 86 * sbh + 16 * sb + 4 * a * s * b);
    CHECK(block_saved_bytes(build("gpt2", b, s, Autocast::none), 3) == 58 * sbh + 4 * a * s * b);
    // Over bf16 weights (FSDP's MixedPrecision) the stream is bf16: the norms keep 2 bytes.
    CHECK(block_saved_bytes(build("gpt2", b, s, Autocast::half_weights), 3) == 82 * sbh + 16 * sb + 4 * a * s * b);
}

TEST_CASE("autocast: gelu_new runs fp32 from pow on, with casts and mixed-dtype kernels non-vectorized") {
    const std::int64_t b = 2, s = 64, h = 1600, E = b * s * 4 * h;
    const Workload w = build("gpt2-xl", b, s, Autocast::fp32_weights);
    const Layer& fc = layer_named(w, "h.5.mlp.c_fc");
    std::int64_t vectorized = 0, indexed = 0, indexed_elements = 0;
    int kernels = 0;
    for (const auto* ops : {&fc.forward, &fc.backward})
        for (const Op& op : *ops) {
            if (op.name.rfind("gelu_new", 0) != 0) continue;
            (op.indexed_elements > 0 ? indexed : vectorized) += op.bytes;
            indexed_elements += op.indexed_elements;
            kernels += op.kernels;
        }
    // Forward: pow, 2 scalar muls, tanh, 1 + t (8 bytes each) and 0.5x (4);
    // x to fp32 (6), x + u (10), 0.5x * (1 + t) (10), the output to bf16 (6).
    // Backward: g * (1 + t) 12, tanh_backward 12, 2 scalar muls 16, pow's 28,
    // 0.5's 4, 2 add_ 12; casts of the incoming, 0.5x, add and cast gradients
    // (6 each) and g * 0.5x (10).
    CHECK(vectorized == (5 * 8 + 4 + 12 + 12 + 16 + 28 + 4 + 12) * E);
    CHECK(indexed == (6 + 10 + 10 + 6 + 4 * 6 + 10) * E);
    CHECK(indexed_elements == (4 + 5) * E);
    CHECK(kernels == 10 + 15);
}

TEST_CASE("autocast over fp32 weights: a Llama block's norms write fp32 and each projection keeps its own cast") {
    const std::int64_t b = 1, s = 256, h = 4096, a = 32, i = 11008;
    const std::int64_t sbh = s * b * h, sb = s * b;
    // RMSNorm over the fp32 stream: pow keeps x itself, `weight * normed` keeps
    // the fp32 normed tensor, plus the fp32 rsqrt per row; no casts run.
    const std::int64_t norm = 4 * sbh + 4 * sbh + 4 * sb;
    // q, k, v each cast the fp32 norm output and keep their bf16 copy; SDPA
    // keeps Q, K, V, O and the log-sum-exp; o_proj its input.
    const std::int64_t attention = 3 * 2 * sbh + 8 * sbh + 4 * a * s * b + 2 * sbh;
    // gate and up: a bf16 copy each; down_proj's side: silu's input and output,
    // up's output and the product (4 tensors of width i).
    const std::int64_t mlp = 2 * 2 * sbh + 4 * 2 * s * b * i;
    const Workload w = build("llama2-7b", b, s, Autocast::fp32_weights);
    CHECK(block_saved_bytes(w, 0) == 2 * norm + attention + mlp);
    // Over bf16 weights the norms cast explicitly (x.to(float32), the bf16
    // output) and q, k and v share one bf16 input, as without autocast.
    CHECK(block_saved_bytes(build("llama2-7b", b, s, Autocast::half_weights), 0) ==
          block_saved_bytes(build("llama2-7b", b, s, Autocast::none), 0));
    CHECK(block_saved_bytes(w, 0) - block_saved_bytes(build("llama2-7b", b, s, Autocast::none), 0) ==
          2 * (4 - 2) * sbh + 3 * 2 * sbh);  // fp32 normed outputs; k, v and up keep their own copies
}

TEST_CASE("HF's upcast loss holds its fp32 logits while it runs, and their gradients in backward") {
    const std::int64_t b = 2, s = 64, vocab = 50257, L = b * s * vocab;
    for (Autocast ac : {Autocast::none, Autocast::fp32_weights}) {
        const Workload w = build("gpt2", b, s, ac);
        const Layer& loss = layer_named(w, "loss");
        CHECK(loss.saved_activation_bytes == 4 * L);    // log_softmax's fp32 output
        CHECK(loss.forward_transient_bytes == 6 * L);   // the bf16 logits and their fp32 copy
        CHECK(loss.backward_transient_bytes == 8 * L);  // nll_loss's and log_softmax's fp32 gradients
    }
}
