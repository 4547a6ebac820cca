// The network as the simulator and executor see it: an ordered list of layers,
// each with its parameter tensors, forward and backward ops, and the bytes it
// saves for backward. Plain values; a builder fills them for one micro-batch.
#pragma once

#include "dtsim/common/dtype.hpp"
#include "dtsim/common/gemm_layout.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace dtsim::models {

// How a transformer's attention core (QK^T, softmax, AV) runs. flash: one fused
// kernel (PyTorch SDPA's FlashAttention / memory-efficient backends, what
// HuggingFace's default attn_implementation="sdpa" runs on GPUs) that never
// materialises the s x s scores and recomputes them in backward. eager:
// HuggingFace's "eager" path, separate GEMMs and softmax/dropout kernels that
// save the s x s probabilities. Parsed and printed by model_registry.hpp.
enum class AttentionImpl : std::uint8_t { flash, eager };

// How torch.autocast shapes a transformer's dtypes (the "-mixed" precisions).
// none: every op runs in the activation dtype (fp32, or a model converted to
// 16 bits, or DeepSpeed's bf16/fp16 engine). fp32_weights: autocast over fp32
// parameters (DDP; FSDP with param_dtype=fp32): the embeddings, and so the
// residual stream, stay fp32; matmuls cast their inputs to the 16-bit dtype
// (each matmul its own copy: the cast cache holds only parameters); ops on
// autocast's fp32 list (layer_norm, pow, softmax, log_softmax, ...) output
// fp32. half_weights: autocast over 16-bit parameters (FSDP MixedPrecision
// with a 16-bit param_dtype): a 16-bit residual stream, but the fp32-list ops
// still output fp32. torch/csrc/autograd/autocast_mode.cpp lists the ops.
enum class Autocast : std::uint8_t { none, fp32_weights, half_weights };

enum class OpKind : std::uint8_t {
    gemm,         // (batched) matrix multiply C[m,n] = A[m,k] * B[k,n], `batch` times
    elementwise,  // memory-bound kernel: norms, activations, softmax, residual adds
    embedding,    // gather (forward) / scatter-add (backward) of table rows
    loss,         // softmax cross-entropy over the logits
};

// One kernel-sized unit of work. A flat struct rather than a variant: the
// simulator prices millions of these, and the fields that do not apply are 0.
struct Op {
    OpKind kind = OpKind::elementwise;
    std::string name;    // "qkv", "attn_scores", "softmax", "fc1.dgrad", ...
    std::int64_t m = 0;  // GEMM only
    std::int64_t n = 0;
    std::int64_t k = 0;
    std::int64_t batch = 1;  // batched GEMMs (attention); 1 otherwise
    DType dtype = DType::fp32;
    // GEMM: which operands the framework hands the BLAS transposed (row-major
    // C[m,n] = op(A) op(B)): nn.Linear's forward is NT, its input gradient NN
    // and its weight gradient TN.
    GemmLayout layout = GemmLayout::nn;
    std::int64_t bytes = 0;  // bytes read + written (elementwise, embedding, loss)
    double flops = 0;        // floating-point operations (2mnk*batch for a GEMM)
    bool recompute = false;  // work repeated from the forward (flash attention's QK^T in backward):
                             // priced like any op, but not counted in Workload::model_flops()
    // Elements of a kernel that torch runs through TensorIterator's
    // non-vectorized path (a broadcast, strided or dtype-casting operand, or a
    // cat): bound by an element rate (DeviceSpec::indexed_elements_per_s), not by
    // its bytes. 0: a vectorized kernel, bound by its bytes.
    std::int64_t indexed_elements = 0;
    int kernels = 1;  // kernel launches the op stands for (a few tiny ones ride on a larger one)
    // GEMM: the largest power of two, up to 8, dividing both feature
    // dimensions (n and k of the forward): the leading dimensions torch's
    // layouts hand cuBLAS, whose alignment picks its kernel family
    // (bench/results/cuda.md §6). The token dimension never is one. A
    // backward GEMM keeps its forward's.
    std::int32_t align_elements = 8;
    // An op read from a profile (`simulate --from-trace`): the time it took
    // there, the gap to the next op included, priced instead of the
    // calibration's curves. 0: priced by the cost model.
    std::int64_t measured_ns = 0;
};


Op make_gemm(std::string name, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, DType dtype,
             GemmLayout layout = GemmLayout::nn);
Op make_elementwise(std::string name, std::int64_t bytes, double flops);

// The two GEMMs of a GEMM's backward: dA = dC * B^T (m x k, inner n) and
// dB = A^T * dC (k x n, inner m), in the layouts input_grad_layout and
// weight_grad_layout give for the forward's. `with_input_grad=false` drops dA
// (first layer).
std::vector<Op> gemm_backward(const Op& forward, bool with_input_grad = true);

struct Parameter {
    std::string name;                 // "h.3.attn.c_attn.weight"
    std::vector<std::int64_t> shape;  // torch shape; numel = product
    int index = -1;                   // position in model.parameters() (definition order)
    std::int64_t numel() const;
};

struct Layer {
    std::string name;               // module path, e.g. "h.3.mlp"
    int block = -1;                 // transformer block / residual stage index; -1 outside blocks
    std::vector<Parameter> params;  // in model.parameters() order
    std::vector<Op> forward;
    std::vector<Op> backward;                 // in execution order
    std::int64_t saved_activation_bytes = 0;  // kept from forward until this layer's backward
    // Held only while the layer's forward (backward) runs: the loss's fp32
    // logits, and in backward their fp32 gradients.
    std::int64_t forward_transient_bytes = 0;
    std::int64_t backward_transient_bytes = 0;
    std::int64_t buffer_bytes = 0;            // registered buffers (broadcast by DDP's broadcast_buffers)

    std::int64_t param_count() const;
};

struct Workload {
    std::string model;  // registry name, e.g. "gpt2-xl"
    std::int64_t micro_batch = 0;
    std::int64_t seq_len = 0;  // 1 for non-sequence models (MLP)
    DType activation_dtype = DType::fp32;
    AttentionImpl attention = AttentionImpl::flash;  // what the attention cores model (no meaning for MLPs)
    Autocast autocast = Autocast::none;              // what the transformer builders modelled
    std::vector<Layer> layers;                       // forward order
    // The torch module class of one block (Layer::block), qualified:
    // "transformers.models.llama.modeling_llama.LlamaDecoderLayer",
    // "torchvision.models.resnet.Bottleneck". Its last part (block_name()) is
    // what FSDP's transformer_auto_wrap_policy and Lightning's
    // activation_checkpointing_policy are given. Empty: a model without blocks
    // (the MLPs, profiles).
    std::string block_class;
    std::string block_name() const { return block_class.substr(block_class.rfind('.') + 1); }
    // The profile a workload was read from (`simulate --from-trace`); empty
    // for a built model. Its measured times already include what the host
    // paid there, such as first-touch page faults of fresh gradients.
    std::string profile;
    // A workload read from a profile: the optimizer step it measured there
    // ("sgd", "adam", "adamw"; empty: none) and its time per parameter
    // element, which prices that optimizer's step on any shard of the
    // parameters. 0: priced by the cost model.
    std::string measured_optimizer;
    double measured_optimizer_ns_per_element = 0;

    std::int64_t param_count() const;
    std::int64_t buffer_bytes() const;
    std::int64_t samples() const { return micro_batch; }
    std::int64_t tokens() const { return micro_batch * seq_len; }
    double forward_flops() const;
    double backward_flops() const;   // every backward op, recompute ops included
    double recompute_flops() const;  // the backward ops marked `recompute`
    // Forward + backward flops of one micro-batch: what MFU counts (recompute excluded).
    double model_flops() const { return forward_flops() + backward_flops() - recompute_flops(); }
};

}  // namespace dtsim::models
