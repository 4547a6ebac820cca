#include "dtsim/models/workload.hpp"

#include "builders.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/gemm_alignment.hpp"

#include <algorithm>
#include <utility>

namespace dtsim::models {

Op make_gemm(std::string name, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, DType dtype,
             GemmLayout layout) {
    DTSIM_ASSERT(m > 0 && n > 0 && k > 0 && batch > 0, "GEMM " + name + " has a non-positive dimension");
    Op op;
    op.kind = OpKind::gemm;
    op.name = std::move(name);
    op.m = m;
    op.n = n;
    op.k = k;
    op.batch = batch;
    op.dtype = dtype;
    op.layout = layout;
    op.flops =
        2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(batch);
    op.align_elements = gemm_alignment(n, k);
    return op;
}

Op make_elementwise(std::string name, std::int64_t bytes, double flops) {
    DTSIM_ASSERT(bytes >= 0 && flops >= 0, "elementwise op " + name + " has negative cost");
    Op op;
    op.kind = OpKind::elementwise;
    op.name = std::move(name);
    op.bytes = bytes;
    op.flops = flops;
    return op;
}

std::vector<Op> gemm_backward(const Op& forward, bool with_input_grad) {
    DTSIM_ASSERT(forward.kind == OpKind::gemm, "gemm_backward of a non-GEMM op " + forward.name);
    std::vector<Op> out;
    // C[m,n] = A[m,k] * B[k,n]
    // dA[m,k] = dC[m,n] * B^T[n,k]: inner dimension n.
    if (with_input_grad)
        out.push_back(make_gemm(forward.name + ".dgrad", forward.m, forward.k, forward.n, forward.batch, forward.dtype,
                                input_grad_layout(forward.layout)));
    // dB[k,n] = A^T[k,m] * dC[m,n]: inner dimension m. (torch writes nn.Linear's
    // dW as dC^T A, the n x k transpose of this product: the same work.)
    out.push_back(make_gemm(forward.name + ".wgrad", forward.k, forward.n, forward.m, forward.batch, forward.dtype,
                            weight_grad_layout(forward.layout)));
    // The same tensors, so the same leading dimensions (the tokens, m, are none of them).
    for (Op& op : out) op.align_elements = forward.align_elements;
    return out;
}

// Backward of an elementwise kernel (norm, activation, softmax, dropout,
// residual add, loss): it reads the incoming gradient plus what the forward
// saved and writes the outgoing gradient, which is about the bytes the forward
// moved. Rule: same bytes and same flops as the forward op, named "<op>.bwd".
Op elementwise_backward(const Op& forward) {
    Op op = forward;
    op.kind = OpKind::elementwise;
    op.name = forward.name + ".bwd";
    return op;
}

std::int64_t Parameter::numel() const {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    return n;
}

std::int64_t Layer::param_count() const {
    std::int64_t n = 0;
    for (const auto& p : params) n += p.numel();
    return n;
}

std::int64_t Workload::param_count() const {
    std::int64_t n = 0;
    for (const auto& l : layers) n += l.param_count();
    return n;
}

std::int64_t Workload::buffer_bytes() const {
    std::int64_t n = 0;
    for (const auto& l : layers) n += l.buffer_bytes;
    return n;
}

double Workload::forward_flops() const {
    double f = 0;
    for (const auto& l : layers)
        for (const auto& op : l.forward) f += op.flops;
    return f;
}

double Workload::backward_flops() const {
    double f = 0;
    for (const auto& l : layers)
        for (const auto& op : l.backward) f += op.flops;
    return f;
}

double Workload::recompute_flops() const {
    double f = 0;
    for (const auto& l : layers)
        for (const auto& op : l.backward)
            if (op.recompute) f += op.flops;
    return f;
}

// ---- LayerBuilder ----------------------------------------------------------

LayerBuilder::LayerBuilder(std::string name, int block, DType dtype) : dtype_(dtype) {
    layer_.name = std::move(name);
    layer_.block = block;
}

void LayerBuilder::param(std::string name, std::vector<std::int64_t> shape, int index) {
    layer_.params.push_back(Parameter{std::move(name), std::move(shape), index});
}

void LayerBuilder::gemm(std::string name, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
                        bool with_input_grad, GemmLayout layout) {
    Op op = make_gemm(std::move(name), m, n, k, batch, dtype_, layout);
    backward_groups_.push_back(gemm_backward(op, with_input_grad));
    layer_.forward.push_back(std::move(op));
}

void LayerBuilder::elementwise(std::string name, std::int64_t bytes, double flops) {
    Op op = make_elementwise(std::move(name), bytes, flops);
    op.dtype = dtype_;
    backward_groups_.push_back({elementwise_backward(op)});
    layer_.forward.push_back(std::move(op));
}

void LayerBuilder::op(Op forward, std::vector<Op> backward) {
    backward_groups_.push_back(std::move(backward));
    layer_.forward.push_back(std::move(forward));
}

void LayerBuilder::save(std::int64_t bytes) {
    layer_.saved_activation_bytes += bytes;
}

void LayerBuilder::transient(std::int64_t forward_bytes, std::int64_t backward_bytes) {
    layer_.forward_transient_bytes = std::max(layer_.forward_transient_bytes, forward_bytes);
    layer_.backward_transient_bytes = std::max(layer_.backward_transient_bytes, backward_bytes);
}

Layer LayerBuilder::finish() && {
    // A layer's backward runs its ops' backwards in reverse forward order.
    for (auto it = backward_groups_.rbegin(); it != backward_groups_.rend(); ++it)
        for (auto& op : *it) layer_.backward.push_back(std::move(op));
    backward_groups_.clear();
    layer_.buffer_bytes = 0;  // none of the built-in models has float buffers DDP broadcasts
    return std::move(layer_);
}

// ---- shared op shapes -------------------------------------------------------

// Embedding lookup of `rows` rows of width `width`. Forward gathers: reads the
// ids (int64) and the rows, writes the output. Backward scatter-adds the
// incoming gradient into the weight gradient: reads the gradient and the ids,
// read-modify-writes the gradient rows (3 tensor passes), one add per element.
void add_embedding(LayerBuilder& lb, const std::string& name, std::int64_t rows, std::int64_t width) {
    const std::int64_t dt = dtype_bytes(lb.dtype());
    Op fwd;
    fwd.kind = OpKind::embedding;
    fwd.name = name;
    fwd.dtype = lb.dtype();
    fwd.bytes = 2 * rows * width * dt + 8 * rows;
    fwd.flops = 0;
    Op bwd = fwd;
    bwd.name = name + ".bwd";
    bwd.bytes = 3 * rows * width * dt + 8 * rows;
    bwd.flops = static_cast<double>(rows * width);
    lb.op(std::move(fwd), {std::move(bwd)});
}

// Loss over `elements` values (logits for cross-entropy, predictions for MSE):
// forward reads them and writes the per-element result (2 passes); the loss
// backward (softmax / MSE gradient) is folded into the same layer as one
// elementwise op of the same bytes and flops (the elementwise rule above).
void add_loss(LayerBuilder& lb, const std::string& name, std::int64_t elements, double flops_per_element) {
    const std::int64_t dt = dtype_bytes(lb.dtype());
    Op fwd;
    fwd.kind = OpKind::loss;
    fwd.name = name;
    fwd.dtype = lb.dtype();
    fwd.bytes = 2 * elements * dt;
    fwd.flops = flops_per_element * static_cast<double>(elements);
    Op bwd = elementwise_backward(fwd);
    lb.op(std::move(fwd), {std::move(bwd)});
}

// Fused causal attention (FlashAttention-2 / PyTorch SDPA). Per (batch, head)
// the kernel computes S = Q K^T, the online softmax and O = P V tile by tile in
// on-chip memory; the s x s scores never reach HBM.
//
// Forward: the two GEMMs with the eager shapes (so the GEMM efficiency curve
// prices them), but causal masking skips the upper triangle, so the masked s
// dimension is halved (rounded up: s(s+1)/2 of the s^2 scores are live):
//   flash.qk   m=s, n=ceil(s/2), k=head_dim, batch=b*heads
//   flash.av   m=s, n=head_dim,  k=ceil(s/2), batch=b*heads
// then "flash.out", the final O / rowsum normalisation, one elementwise pass
// over the output (read + write b*s*heads*head_dim; one multiply per element).
// The softmax exponentials run inside the GEMM tiles and are not charged.
// With K/V at kv_heads (GQA) the kernel indexes the shared K/V head: no copies.
//
// Backward, in kernel order: flash.out.bwd (D = rowsum(dO * O), same pass
// over the output), flash.qk.recompute (S again, the forward qk shape, marked
// `recompute`), then dV = P^T dO and dP = dO V^T (flash.av's gemm_backward),
// then dQ = dS K and dK = dS^T Q (flash.qk's gemm_backward).
//
// Saved for backward: Q (b*s*heads*head_dim), K and V (b*s*kv_heads*head_dim
// each) and the output O (b*s*heads*head_dim) in the activation dtype, plus
// the fp32 log-sum-exp per row (4 * b*heads*s bytes). Attention dropout runs
// inside the kernel from a saved RNG seed/offset and is regenerated in
// backward, so no mask is stored.
void add_flash_attention(LayerBuilder& lb, std::int64_t b, std::int64_t s, std::int64_t heads, std::int64_t kv_heads,
                         std::int64_t head_dim) {
    const DType dtype = lb.dtype();
    const std::int64_t dt = dtype_bytes(dtype);
    const std::int64_t live = (s + 1) / 2;  // causal: the masked s dimension, halved
    const std::int64_t bh = b * heads;
    const std::int64_t q_elems = b * s * heads * head_dim;
    const std::int64_t kv_elems = b * s * kv_heads * head_dim;

    Op qk = make_gemm("flash.qk", s, live, head_dim, bh, dtype, GemmLayout::nt);  // Q K^T
    Op av = make_gemm("flash.av", s, head_dim, live, bh, dtype);
    Op recompute = make_gemm("flash.qk.recompute", s, live, head_dim, bh, dtype, GemmLayout::nt);
    recompute.recompute = true;

    std::vector<Op> qk_bwd = gemm_backward(qk);
    std::vector<Op> av_bwd = gemm_backward(av);
    av_bwd.insert(av_bwd.begin(), std::move(recompute));  // S is rebuilt before dV, dP
    lb.op(std::move(qk), std::move(qk_bwd));
    lb.op(std::move(av), std::move(av_bwd));
    lb.elementwise("flash.out", 2 * q_elems * dt, flops_per_element::mul * static_cast<double>(q_elems));

    lb.save((2 * q_elems + 2 * kv_elems) * dt + 4 * bh * s);  // Q, O; K, V; log-sum-exp (fp32)
}

Workload empty_workload(const std::string& name, std::int64_t micro_batch, std::int64_t seq_len, DType activation_dtype,
                        AttentionImpl attention) {
    Workload w;
    w.model = name;
    w.micro_batch = micro_batch;
    w.seq_len = seq_len;
    w.activation_dtype = activation_dtype;
    w.attention = attention;
    return w;
}

void add_rotary_attention(LayerBuilder& lb, std::int64_t b, std::int64_t s, std::int64_t heads, std::int64_t kv_heads,
                          std::int64_t head_dim, AttentionImpl attention) {
    const std::int64_t T = b * s, qd = heads * head_dim, kvd = kv_heads * head_dim;
    const std::int64_t S2 = b * heads * s * s;
    const std::int64_t dt = dtype_bytes(lb.dtype());
    add_rotary(lb, T * qd, T * kvd);
    if (attention == AttentionImpl::flash) return add_flash_attention(lb, b, s, heads, kv_heads, head_dim);
    if (kvd < qd) lb.elementwise("repeat_kv", (2 * T * kvd + 2 * T * qd) * dt, 0);
    lb.gemm("qk", s, s, head_dim, b * heads, true, GemmLayout::nt);  // Q K^T
    lb.elementwise("softmax", 2 * S2 * dt,
                   flops_per_element::softmax * static_cast<double>(S2));  // scale + causal mask + softmax
    lb.gemm("av", s, head_dim, s, b * heads);
    lb.save(3 * T * qd * dt + S2 * dt);
    // SDPA's fused kernels write the output as (b, s, heads, head_dim), so
    // transpose(1, 2).reshape is a view; eager attention's is a copy.
    lb.elementwise("merge_heads", 2 * T * qd * dt, 0);
}

}  // namespace dtsim::models
