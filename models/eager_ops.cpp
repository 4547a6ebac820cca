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

#include <algorithm>

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
//
// Under Autocast::fp32_weights the input is the fp32 residual stream, so
// input_dtype is fp32: neither cast runs, `weight * x` writes fp32 (4 bytes an
// element, not dt), and the saved normalised output is that fp32 tensor.
void add_rms_norm(LayerBuilder& lb, const std::string& name, std::int64_t rows, std::int64_t width, Autocast autocast) {
    const DType dtype = lb.dtype();
    const std::int64_t E = rows * width;
    const bool fp32_stream = autocast == Autocast::fp32_weights;
    const std::int64_t dt = fp32_stream ? 4 : dtype_bytes(dtype);
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
//
// Under autocast pow is on the fp32 list, so pow's input is an fp32 copy of x
// and everything from there on is fp32; only 0.5x stays in dt, and the output
// is cast back to dt for c_proj. (Read off torch 2.11's H100 trace and memory
// history of GPT2LMHeadModel under autocast(bf16), bench/results/cuda_hf_step.md.)
//   forward:  vectorized: pow, two scalar muls, tanh, 1 + (8 bytes each, fp32)
//             and 0.5x (2dt): 6 kernels, 40 + 2dt; non-vectorized (casts and
//             mixed-dtype operands): x to fp32 (dt+4), x + u (dt+8),
//             0.5x * (1 + t) (dt+8), the output to dt (4+dt): 4 kernels
//   backward: vectorized: g * (1 + t) (12), tanh_backward (12), two scalar
//             muls (8 each), pow's backward (pow, mul by 3, mul: 28), 0.5's
//             (2dt), two add_ of x's three gradients (6dt): 10 kernels,
//             68 + 8dt; non-vectorized: the incoming gradient to fp32, the
//             0.5x gradient to dt, g * 0.5x, the add's and the cast's
//             gradients to dt: 5 kernels, 24 + 5dt
// Saved: pow's fp32 input, tanh's output and 1 + tanh (fp32), and 0.5x (dt):
// (12 + dt) E bytes, and not the input x, which nothing keeps.
void add_gelu_new(LayerBuilder& lb, std::int64_t elements, Autocast autocast) {
    const DType dtype = lb.dtype();
    const std::int64_t dt = dtype_bytes(dtype);
    const std::int64_t E = elements;
    const double flops = flops_per_element::gelu * static_cast<double>(E);
    if (autocast == Autocast::none || dt == 4) {
        lb.op(vectorized("gelu_new", 18 * dt * E, dtype, flops, 8),
              {vectorized("gelu_new.bwd", 28 * dt * E, dtype, flops, 11)});
        lb.save(3 * dt * E);
        return;
    }
    Op cast = indexed("gelu_new.fp32_ops", 4 * E, (24 + 4 * dt) * E, dtype);
    cast.kernels = 4;
    Op cast_bwd = indexed("gelu_new.fp32_ops.bwd", 5 * E, (24 + 5 * dt) * E, dtype);
    cast_bwd.kernels = 5;
    add_module(lb, {vectorized("gelu_new", (40 + 2 * dt) * E, dtype, flops, 6), std::move(cast)},
               {std::move(cast_bwd), vectorized("gelu_new.bwd", (68 + 8 * dt) * E, dtype, flops, 10)});
    lb.save((12 + dt) * E);
}

// torch.nn.LayerNorm (native_layer_norm) over E = rows x width elements.
// Without autocast: one kernel reading and writing dt, its backward the same
// bytes; it saves its input (dt E; the mean and rstd are not counted).
// Under autocast the output is fp32 (4 bytes) and a cast kernel makes the dt
// copy the next matmul reads; the input is the residual stream (fp32 under
// fp32_weights). Backward: the incoming dt gradient cast to fp32, then the
// input gradient (reads the gradient and x, writes x's dtype) and the
// weight/bias gradient (reads both again): 8 + 3 x bytes an element, x the
// input's bytes. Saves its input and the fp32 mean and rstd (8 bytes a row).
void add_layer_norm(LayerBuilder& lb, const std::string& name, std::int64_t rows, std::int64_t width,
                    Autocast autocast) {
    const DType dtype = lb.dtype();
    const std::int64_t dt = dtype_bytes(dtype);
    const std::int64_t E = rows * width;
    const double flops = flops_per_element::layer_norm * static_cast<double>(E);
    if (autocast == Autocast::none || dt == 4) {
        lb.elementwise(name, 2 * E * dt, flops);
        lb.save(E * dt);
        return;
    }
    const std::int64_t x = autocast == Autocast::fp32_weights ? 4 : dt;
    add_module(lb, {vectorized(name, (x + 4) * E, dtype, flops), indexed(name + ".to_dtype", E, (4 + dt) * E, dtype)},
               {indexed(name + ".to_fp32.bwd", E, (dt + 4) * E, dtype),
                vectorized(name + ".bwd", (8 + 3 * x) * E, dtype, flops, 2)});
    lb.save(x * E + 8 * rows);
}

void add_residual(LayerBuilder& lb, std::int64_t elements, Autocast autocast) {
    const DType dtype = lb.dtype();
    const std::int64_t dt = dtype_bytes(dtype);
    const double flops = flops_per_element::add * static_cast<double>(elements);
    if (autocast != Autocast::fp32_weights || dt == 4) {
        lb.elementwise("residual", 3 * elements * dt, flops);
        return;
    }
    // The branch (dt) plus the fp32 stream, written fp32: a mixed-dtype kernel.
    // Backward: the stream's gradient passes through; the branch's is cast to dt.
    lb.op(indexed("residual", elements, (dt + 8) * elements, dtype, flops),
          {indexed("residual.bwd", elements, (4 + dt) * elements, dtype)});
}

// autocast's copy_ of fp32 weights to dtype, or (backward) of their gradients back.
Op weight_cast(std::int64_t elements, DType dtype, bool backward = false) {
    return indexed(backward ? "autocast.weights.bwd" : "autocast.weights", elements,
                   (4 + dtype_bytes(dtype)) * elements, dtype);
}

void add_weight_cast(LayerBuilder& lb, std::int64_t elements, Autocast autocast) {
    const DType dtype = lb.dtype();
    if (autocast != Autocast::fp32_weights || dtype_bytes(dtype) == 4) return;
    lb.op(weight_cast(elements, dtype), {weight_cast(elements, dtype, true)});
}

void add_autocast_weight_casts(Workload& w) {
    if (w.autocast != Autocast::fp32_weights || dtype_bytes(w.activation_dtype) == 4) return;
    for (Layer& l : w.layers) {
        const bool matmul = std::any_of(l.forward.begin(), l.forward.end(),
                                        [](const Op& op) { return op.kind == OpKind::gemm && !op.recompute; });
        const std::int64_t n = l.param_count();
        if (!matmul || n == 0) continue;
        l.forward.insert(l.forward.begin(), weight_cast(n, w.activation_dtype));
        l.backward.push_back(weight_cast(n, w.activation_dtype, true));
    }
}

bool add_autocast_input_cast(LayerBuilder& lb, const std::string& name, std::int64_t elements, Autocast autocast) {
    const DType dtype = lb.dtype();
    const std::int64_t dt = dtype_bytes(dtype);
    if (autocast != Autocast::fp32_weights || dt == 4) return false;
    // The cast's backward turns the matmul's dt input gradient into fp32, and
    // autograd adds it into the norm output's gradient (12 bytes an element).
    lb.op(indexed(name + ".to_dtype", elements, (4 + dt) * elements, dtype),
          {indexed(name + ".to_dtype.bwd", elements, (dt + 4) * elements, dtype),
           vectorized(name + ".grad_accumulate", 12 * elements, dtype)});
    return true;
}

// HuggingFace's causal-LM loss (ForCausalLMLoss): logits.float(), then
// cross_entropy (log_softmax + nll_loss), over L = tokens x vocab logits.
//   forward:  [cast to fp32: indexed L, (dt+4)L], log_softmax: 16L (the max
//             and sum passes read the row, then it is written), nll_loss: tiny
//   backward: the gradient zero-filled (4L), nll_loss_backward (tiny),
//             log_softmax_backward (16L), [cast back to dt: (4+dt)L]
// Saved: the log-softmax output, in fp32. Held while the forward runs: the
// logits (dt L, the model's output) and their fp32 copy (4L; the same tensor
// without casts). While the backward runs: nll_loss's zero-filled gradient and
// log_softmax's input gradient, both fp32 (8L; measured on an H100:
// bench/results/cuda_hf_step.md).
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
    lb.transient((casts ? dt + 4 : 4) * L, 8 * L);
}

}  // namespace dtsim::models
