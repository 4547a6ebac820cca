// Modules that HuggingFace models run as several eager torch kernels, counted
// kernel by kernel as torch runs them (builders.hpp). The kernel lists and
// their classes were read off Kineto traces of real Llama-2 blocks on an H100
// and an H200 (bench/results/cuda.md, bench/cuda/torch_llama_layers.py):
//
// - vectorized kernels (contiguous operands of one dtype) stream at memory
//   speed: an op of `bytes`, priced by bandwidth;
// - non-vectorized kernels (a broadcast, strided or dtype-casting operand, or
//   cat) take the same time on both GPUs despite the H200's 40% more
//   bandwidth: an op with `indexed_elements`, priced by an element rate.
//
// E below is the elements of the tensor the module transforms; dt the
// activation dtype's bytes. Casts to and from fp32 exist only when dt != 4.
#include "builders.hpp"

namespace dtsim::models {
namespace {

Op vectorized(std::string name, std::int64_t bytes, DType dtype, double flops = 0, int kernels = 1) {
    Op op = make_elementwise(std::move(name), bytes, flops);
    op.dtype = dtype;
    op.kernels = kernels;
    return op;
}

Op indexed(std::string name, std::int64_t elements, std::int64_t bytes, DType dtype, double flops = 0) {
    Op op = make_elementwise(std::move(name), bytes, flops);
    op.dtype = dtype;
    op.indexed_elements = elements;
    return op;
}

// Forward kernels first; the backward group runs after the layer's later ops'
// backward groups, in the order given.
void add_module(LayerBuilder& lb, std::vector<Op> forward, std::vector<Op> backward) {
    for (std::size_t i = 0; i + 1 < forward.size(); ++i) lb.op(std::move(forward[i]), {});
    lb.op(std::move(forward.back()), std::move(backward));
}

}  // namespace

// LlamaRMSNorm.forward: x.to(float32); x.pow(2).mean(-1, keepdim=True);
// x * torch.rsqrt(variance + eps); weight * x.to(input_dtype).
//   forward:  [cast to fp32: indexed E, (dt+4)E], pow: 8E, mean: 4E,
//             add + rsqrt on the b*s row statistics (2 tiny kernels),
//             x * rsqrt (broadcast): indexed E, 8E, [cast back: (4+dt)E],
//             weight * x (broadcast): indexed E, 2dt E
//   backward (autograd, in kernel order): grad * weight (broadcast): indexed E;
//             grad * normed (weight grad): 3dt E; sum over rows: dt E;
//             [cast grad to fp32: indexed E]; x * grad: 12E;
//             grad * rsqrt (broadcast): indexed E, 8E; sum: 4E; 3 tiny kernels
//             on the row statistics; mean's backward (expand / n): indexed E,
//             4E; pow's backward (2x): 8E; mul: 12E; add_: 12E; [cast: (4+dt)E]
// Saved: x in fp32 (4E bytes) and the normalised output in dt (dt E); the
// row statistics are b*s floats.
void add_rms_norm(LayerBuilder& lb, const std::string& name, std::int64_t rows, std::int64_t width) {
    const DType dtype = lb.dtype();
    const std::int64_t dt = dtype_bytes(dtype);
    const std::int64_t E = rows * width;
    const bool casts = dt != 4;
    const double flops = flops_per_element::rms_norm * static_cast<double>(E);

    std::vector<Op> fwd;
    if (casts) fwd.push_back(indexed(name + ".to_fp32", E, (dt + 4) * E, dtype));
    fwd.push_back(vectorized(name + ".pow_mean", 12 * E, dtype, flops, 2));
    fwd.push_back(vectorized(name + ".rsqrt", 16 * rows, dtype, 0, 2));
    fwd.push_back(indexed(name + ".scale", E, 8 * E, dtype));
    if (casts) fwd.push_back(vectorized(name + ".to_dtype", (4 + dt) * E, dtype));
    fwd.push_back(indexed(name + ".weight", E, 2 * dt * E, dtype));

    std::vector<Op> bwd;
    bwd.push_back(indexed(name + ".weight.bwd", E, 2 * dt * E, dtype, flops));
    bwd.push_back(vectorized(name + ".weight_grad", 4 * dt * E, dtype, 0, 2));  // grad * normed, sum over rows
    if (casts) bwd.push_back(indexed(name + ".to_fp32.bwd", E, (dt + 4) * E, dtype));
    bwd.push_back(vectorized(name + ".x_grad", 16 * E, dtype, 0, 2));  // x * grad, sum
    bwd.push_back(indexed(name + ".scale.bwd", E, 8 * E, dtype));
    bwd.push_back(vectorized(name + ".rsqrt.bwd", 24 * rows, dtype, 0, 3));
    bwd.push_back(indexed(name + ".mean.bwd", E, 4 * E, dtype));
    bwd.push_back(vectorized(name + ".pow.bwd", 32 * E, dtype, 0, 3));  // 2x, mul, add_
    if (casts) bwd.push_back(vectorized(name + ".to_dtype.bwd", (4 + dt) * E, dtype));
    add_module(lb, std::move(fwd), std::move(bwd));
    lb.save(4 * E + dt * E + 4 * rows);
}

// apply_rotary_pos_emb: q * cos + rotate_half(q) * sin, and the same for k,
// on the (b, heads, s, head_dim) views of the projections, which are strided:
// every kernel is non-vectorized.
//   forward per tensor of E elements: mul by cos (E), neg of one half (E/2),
//             cat (E), mul by sin (E), add (E): 4.5E elements, 10dt E bytes
//   backward: the same five, then the gradient copied back to the
//             projection's contiguous layout (E): 5.5E elements, 12dt E bytes
// Saves nothing per token: cos and sin are (s, head_dim), shared by the layers.
void add_rotary(LayerBuilder& lb, std::int64_t q_elements, std::int64_t k_elements) {
    const DType dtype = lb.dtype();
    const std::int64_t dt = dtype_bytes(dtype);
    std::vector<Op> fwd, bwd;
    for (auto [name, E] : {std::pair<const char*, std::int64_t>{"rotary.q", q_elements}, {"rotary.k", k_elements}}) {
        const double flops = flops_per_element::rotary * static_cast<double>(E);
        Op f = indexed(name, 9 * E / 2, 10 * dt * E, dtype, flops);
        f.kernels = 5;
        Op b = indexed(std::string(name) + ".bwd", 11 * E / 2, 12 * dt * E, dtype, flops);
        b.kernels = 6;
        fwd.push_back(std::move(f));
        bwd.push_back(std::move(b));
    }
    add_module(lb, std::move(fwd), std::move(bwd));
}

// LlamaMLP's act_fn(gate) * up, over E = tokens x intermediate elements:
//   forward:  silu (2dt E), mul (3dt E), both vectorized
//   backward: mul for up's gradient (3dt E), mul for silu's output gradient
//             (3dt E), silu_backward (3dt E)
void add_swiglu(LayerBuilder& lb, std::int64_t elements) {
    const DType dtype = lb.dtype();
    const std::int64_t dt = dtype_bytes(dtype);
    const double E = static_cast<double>(elements);
    lb.op(vectorized("silu", 2 * dt * elements, dtype, flops_per_element::silu * E),
          {vectorized("silu.bwd", 3 * dt * elements, dtype, flops_per_element::silu * E)});
    lb.op(vectorized("mul", 3 * dt * elements, dtype, flops_per_element::mul * E),
          {vectorized("mul.bwd", 6 * dt * elements, dtype, flops_per_element::mul * E, 2)});
}

// HuggingFace's NewGELUActivation (GPT-2's "gelu_new"), written out in torch:
// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3)))), over E
// elements, every kernel vectorized (the H100 trace of GPT-2 XL lists them):
//   forward:  pow, mul, add, mul, tanh, add, mul (0.5x), mul: 8 kernels, six
//             of one tensor operand (2dt each) and two of two (3dt): 18dt E bytes
//   backward: the final mul's two products, tanh_backward, 4 scalar muls, pow,
//             the mul by 3x^2, two add_ into x's gradient: 11 kernels, 28dt E
// Saved beyond the input (which the caller counts): tanh's output and the
// final mul's operands (0.5x and 1 + tanh), 3dt E bytes.
void add_gelu_new(LayerBuilder& lb, std::int64_t elements) {
    const DType dtype = lb.dtype();
    const std::int64_t dt = dtype_bytes(dtype);
    const double flops = flops_per_element::gelu * static_cast<double>(elements);
    lb.op(vectorized("gelu_new", 18 * dt * elements, dtype, flops, 8),
          {vectorized("gelu_new.bwd", 28 * dt * elements, dtype, flops, 11)});
    lb.save(3 * dt * elements);
}

// HuggingFace's causal-LM loss (ForCausalLMLoss): logits.float(), then
// cross_entropy (log_softmax + nll_loss), over L = tokens x vocab logits.
//   forward:  [cast to fp32: indexed L, (dt+4)L], log_softmax: 16L (the max
//             and sum passes read the row, then it is written), nll_loss: tiny
//   backward: the gradient zero-filled (4L), nll_loss_backward (tiny),
//             log_softmax_backward (16L), [cast back to dt: (4+dt)L]
// Saved: the log-softmax output, in fp32.
void add_upcast_cross_entropy(LayerBuilder& lb, std::int64_t rows, std::int64_t vocab) {
    const DType dtype = lb.dtype();
    const std::int64_t dt = dtype_bytes(dtype);
    const std::int64_t L = rows * vocab;
    const bool casts = dt != 4;
    const double flops = flops_per_element::cross_entropy * static_cast<double>(L);
    Op loss = vectorized("cross_entropy", 16 * L, dtype, flops, 2);
    loss.kind = OpKind::loss;
    std::vector<Op> fwd;
    if (casts) fwd.push_back(indexed("logits.to_fp32", L, (dt + 4) * L, dtype));
    fwd.push_back(std::move(loss));
    std::vector<Op> bwd;
    bwd.push_back(vectorized("cross_entropy.bwd", 20 * L, dtype, flops, 3));
    if (casts) bwd.push_back(vectorized("logits.to_fp32.bwd", (4 + dt) * L, dtype));
    add_module(lb, std::move(fwd), std::move(bwd));
    lb.save(4 * L);
}

}  // namespace dtsim::models
