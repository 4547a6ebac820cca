#include "dtsim/sim/step_builder.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/sim/selective_ac.hpp"

#include <algorithm>
#include <cmath>

namespace dtsim::sim {

StepBuilder::StepBuilder(Plan& plan, const models::Workload& workload, const Config& config)
    : plan_(plan), w_(workload), c_(config) {
    compute_ = plan_.add_stream("compute", TaskKind::compute);
    plan_.compute_stream = compute_;
    plan_.compute_dtype = w_.activation_dtype;
    const int n = layers();
    segment_first_.assign(static_cast<std::size_t>(n), -1);
    segment_last_.assign(static_cast<std::size_t>(n), -1);
    segment_input_bytes_.assign(static_cast<std::size_t>(n), 0);
    op_saved_bytes_.assign(static_cast<std::size_t>(n), 0);
    if (!c_.activation_checkpointing) return;
    std::vector<std::pair<int, int>> segments;
    // One checkpoint segment per transformer block / residual stage, as
    // HuggingFace's gradient_checkpointing_enable() wraps each block; with
    // ac_freq N only every N-th block, counting from 1 (torchtitan's
    // _apply_ac_to_transformer_block: `_count % ac_freq == 0`).
    int blocks_seen = 0;
    for (int l = 0; l < n;) {
        const int block = w_.layers[static_cast<std::size_t>(l)].block;
        int end = l;
        while (end + 1 < n && block >= 0 && w_.layers[static_cast<std::size_t>(end) + 1].block == block) ++end;
        if (block >= 0 && ++blocks_seen % c_.ac_freq == 0) {
            for (int i = l; i <= end; ++i) {
                segment_first_[static_cast<std::size_t>(i)] = l;
                segment_last_[static_cast<std::size_t>(i)] = end;
            }
            // The segment keeps its input: what the first layer saves of it, or
            // (when that layer saves nothing of its own) the previous layer's output.
            std::int64_t input = w_.layers[static_cast<std::size_t>(l)].saved_activation_bytes;
            if (input == 0 && l > 0) input = w_.layers[static_cast<std::size_t>(l) - 1].saved_activation_bytes;
            segment_input_bytes_[static_cast<std::size_t>(l)] = input;
            segments.emplace_back(l, end);
        }
        l = end + 1;
    }
    if (!c_.ac_op) return;
    // Op-level selective AC: the forward keeps the saved ops' outputs (the
    // policy's cache), and the recompute runs the other ops only.
    plan_.recompute_saved = op_sac_saved_ops(w_, segments);
    for (int l = 0; l < n; ++l) {
        const auto& layer = w_.layers[static_cast<std::size_t>(l)];
        const auto& mask = plan_.recompute_saved[static_cast<std::size_t>(l)];
        for (std::size_t i = 0; i < mask.size(); ++i)
            if (mask[i] != 0)
                op_saved_bytes_[static_cast<std::size_t>(l)] += op_sac_output_bytes(layer, layer.forward[i]);
    }
}

// What a checkpointed layer holds once its recompute has run: everything its
// backward reads. Op-level SAC's cached outputs become part of it; should they
// exceed what an uncheckpointed layer saves, the larger stays.
std::int64_t StepBuilder::recomputed_bytes(int layer) const {
    return std::max(w_.layers[static_cast<std::size_t>(layer)].saved_activation_bytes,
                    op_saved_bytes_[static_cast<std::size_t>(layer)]);
}

int StepBuilder::stream(const std::string& name, TaskKind kind) {
    for (std::size_t i = 0; i < plan_.streams.size(); ++i)
        if (plan_.streams[i].name == name) return static_cast<int>(i);
    return plan_.add_stream(name, kind);
}

int StepBuilder::world_group() {
    return plan_.add_group({c_.topology.world_size(), c_.topology.nodes});
}
int StepBuilder::node_group() {
    return plan_.add_group({c_.topology.gpus_per_node, 1});
}
int StepBuilder::cross_node_group() {
    return plan_.add_group({c_.topology.nodes, c_.topology.nodes});
}

bool StepBuilder::checkpointed(int layer) const {
    return segment_first_[static_cast<std::size_t>(layer)] >= 0;
}

std::int64_t StepBuilder::autocast_copy_bytes(int layer) const {
    // Autocast casts each weight to the compute dtype once per forward and
    // autograd keeps that copy for backward (strategy-semantics.md §6).
    return autocast_ && mixed_precision()
               ? w_.layers[static_cast<std::size_t>(layer)].param_count() * dtype_bytes(w_.activation_dtype)
               : 0;
}

std::int32_t StepBuilder::add(Task t, Deps deps) {
    return plan_.add_task(t, deps);
}

std::int32_t StepBuilder::add_after_barriers(Task t, Deps deps) {
    if (compute_barriers_.empty()) return add(t, deps);
    std::vector<std::int32_t> all(deps.begin(), deps.end());
    all.insert(all.end(), compute_barriers_.begin(), compute_barriers_.end());
    return add(t, all);
}

std::int32_t StepBuilder::add_compute(Task t, Deps deps) {
    const std::int32_t id = add_after_barriers(t, deps);
    compute_barriers_.clear();
    return id;
}

void StepBuilder::synchronous_collective(std::int32_t task) {
    if (c_.collectives_block_compute) compute_barriers_.push_back(task);
}

// BatchNorm layers are the ones with buffers (running statistics).
bool StepBuilder::sync_batchnorm(int layer) const {
    return c_.sync_batchnorm && c_.topology.world_size() > 1 &&
           w_.layers[static_cast<std::size_t>(layer)].buffer_bytes > 0;
}

std::int32_t StepBuilder::forward(int m, int layer, Deps deps) {
    Task t{.kind = TaskKind::compute, .phase = Phase::forward, .stream = compute_, .micro_step = m, .layer = layer};
    std::int32_t id;
    if (!sync_batchnorm(layer)) {
        id = add_compute(t, deps);
    } else {
        std::vector<std::int32_t> forward_deps(deps.begin(), deps.end());
        // SyncBatchNorm's forward all-gathers each rank's mean, invstd and count
        // (2C + 1 floats) before normalising; buffers are 2C fp32 + an int64.
        const std::int64_t channels = (w_.layers[static_cast<std::size_t>(layer)].buffer_bytes - 8) / 8;
        const std::int64_t bytes = c_.topology.world_size() * (2 * channels + 1) * 4;
        const std::int32_t after[] = {plan_.tasks.empty() ? -1 : static_cast<std::int32_t>(plan_.tasks.size()) - 1};
        forward_deps.push_back(collective(CollectiveKind::allgather, bytes, world_group(),
                                          stream("sync_batchnorm", TaskKind::collective), after, m));
        id = add_compute(t, forward_deps);
    }
    const auto& l = w_.layers[static_cast<std::size_t>(layer)];
    plan_.alloc(MemCategory::activations, l.forward_transient_bytes);  // held while the task runs
    plan_.release(MemCategory::activations, l.forward_transient_bytes);
    if (!checkpointed(layer)) {
        plan_.alloc(MemCategory::activations, l.saved_activation_bytes);
        plan_.alloc(MemCategory::other, autocast_copy_bytes(layer));
    } else {
        if (segment_first_[static_cast<std::size_t>(layer)] == layer)
            plan_.alloc(MemCategory::activations, segment_input_bytes_[static_cast<std::size_t>(layer)]);
        plan_.alloc(MemCategory::activations, op_saved_bytes_[static_cast<std::size_t>(layer)]);
        // Under checkpointing nothing else is saved, but the autocast cache holds
        // the casts until the forward ends.
        plan_.alloc(MemCategory::other, autocast_copy_bytes(layer));
        autocast_cache_bytes_ += autocast_copy_bytes(layer);
    }
    if (layer == layers() - 1 && autocast_cache_bytes_ > 0) {
        plan_.release(MemCategory::other, autocast_cache_bytes_);
        autocast_cache_bytes_ = 0;
    }
    return id;
}

std::int32_t StepBuilder::backward(int m, int layer, Deps deps, std::int64_t fused_bytes) {
    const auto idx = static_cast<std::size_t>(layer);
    const auto& l = w_.layers[idx];
    std::int32_t recomputed = -1;  // under checkpointing, backward follows the recompute instead of `deps`
    if (checkpointed(layer) && segment_last_[idx] == layer) {
        // Recompute the segment's forward, saving its activations this time (§6).
        std::int32_t previous = -1;
        for (int r = segment_first_[idx]; r <= layer; ++r) {
            Task t{
                .kind = TaskKind::compute, .phase = Phase::recompute, .stream = compute_, .micro_step = m, .layer = r};
            previous = r == segment_first_[idx] ? add_compute(t, deps) : add(t, {});
            plan_.alloc(MemCategory::activations, recomputed_bytes(r) - op_saved_bytes_[static_cast<std::size_t>(r)]);
            plan_.alloc(MemCategory::other, autocast_copy_bytes(r));
        }
        recomputed = previous;
    }
    Task t{.kind = TaskKind::compute, .phase = Phase::backward, .stream = compute_, .micro_step = m, .layer = layer};
    t.bytes = fused_bytes;
    const std::int32_t after_recompute[] = {recomputed};
    const std::int32_t id = add_compute(t, recomputed >= 0 ? Deps(after_recompute) : deps);
    plan_.alloc(MemCategory::activations, l.backward_transient_bytes);  // held while the task runs
    plan_.release(MemCategory::activations, l.backward_transient_bytes);
    plan_.release(MemCategory::activations, checkpointed(layer) ? recomputed_bytes(layer) : l.saved_activation_bytes);
    plan_.release(MemCategory::other, autocast_copy_bytes(layer));
    if (checkpointed(layer) && segment_first_[idx] == layer)
        plan_.release(MemCategory::activations, segment_input_bytes_[idx]);
    if (sync_batchnorm(layer)) {
        // SyncBatchNorm's backward all-reduces sum_dy and sum_dy_xmu (2C floats);
        // the layers below wait for it.
        const std::int64_t channels = (l.buffer_bytes - 8) / 8;
        const std::int32_t after[] = {id};
        compute_barriers_.push_back(collective(CollectiveKind::allreduce, 2 * channels * 4, world_group(),
                                               stream("sync_batchnorm", TaskKind::collective), after, m));
    }
    return id;
}

std::int32_t StepBuilder::collective(CollectiveKind kind, std::int64_t bytes, int group, int stream_index, Deps deps,
                                     int m, int bucket, DType dtype) {
    Task t{.kind = TaskKind::collective,
           .phase = Phase::communication,
           .stream = stream_index,
           .micro_step = m,
           .bucket = bucket};
    t.collective = kind;
    t.dtype = dtype;
    t.group = group;
    t.bytes = bytes;
    // A thread blocked in a synchronous collective issues nothing else either:
    // on a CPU backend the next collective waits for it as compute does (FSDP's
    // backward prefetch all-gather queues behind the reduce-scatter before it;
    // in a torch CPU profile the two never overlap).
    return c_.collectives_block_compute ? add_after_barriers(t, deps) : add(t, deps);
}

std::int32_t StepBuilder::pass(Phase phase, std::int64_t bytes, double flops, Deps deps, int m, int stream_index,
                               int launches) {
    Task t{.kind = TaskKind::compute,
           .phase = phase,
           .stream = stream_index < 0 ? compute_ : stream_index,
           .micro_step = m};
    t.bytes = bytes;
    t.flops = flops;
    t.launches = launches;
    return add(t, deps);
}

std::int32_t StepBuilder::copy(Transfer direction, std::int64_t bytes, int stream_index, Deps deps, int m,
                               bool pinned) {
    DTSIM_ASSERT(direction == Transfer::h2d || direction == Transfer::d2h, "a copy goes h2d or d2h");
    Task t{.kind = TaskKind::copy, .phase = Phase::transfer, .stream = stream_index, .micro_step = m};
    t.bytes = bytes;
    t.transfer = direction;
    t.pinned = pinned;
    return add(t, deps);
}

std::int32_t StepBuilder::host_optimizer(std::int64_t parameters, int stream_index, Deps deps, int m,
                                         bool torch_optimizer) {
    Task t{.kind = TaskKind::host_compute, .phase = Phase::optimizer, .stream = stream_index, .micro_step = m};
    t.elements = parameters;
    t.torch_cpu_optimizer = torch_optimizer;
    return add(t, deps);
}

std::int32_t StepBuilder::host_task(std::int64_t duration_ns, int stream_index, Deps deps, int m) {
    Task t{.kind = TaskKind::host_compute, .phase = Phase::communication, .stream = stream_index, .micro_step = m};
    t.fixed_ns = duration_ns;
    return add(t, deps);
}

std::int32_t StepBuilder::nvme(Transfer direction, std::int64_t bytes, int stream_index, Deps deps, int m) {
    DTSIM_ASSERT(direction == Transfer::nvme_read || direction == Transfer::nvme_write, "NVMe reads or writes");
    Task t{.kind = TaskKind::io, .phase = Phase::transfer, .stream = stream_index, .micro_step = m};
    t.bytes = bytes;
    t.transfer = direction;
    return add(t, deps);
}

namespace {

// Whether a profile's optimizer ("sgd", "adam", "adamw") is the one configured.
bool optimizer_matches(const std::string& measured, OptimizerKind configured) {
    return !measured.empty() && optimizer_from_string(measured) == configured;
}

// ATen's multi_tensor_apply (MultiTensorApply.cuh), with the 32 KB kernel
// argument that CUDA >= 12.1 builds use on sm >= 70: one launch covers up to
// 2240 blocks of 65,536-element chunks, and up to a depth-dependent number of
// tensors (770, 448, 336, 252 for 1-4 tensor lists).
constexpr std::int64_t kChunkElements = 65536;
constexpr std::int64_t kBlocksPerLaunch = 2240;
constexpr std::int64_t kTensorsPerLaunch[] = {770, 448, 336, 252};

std::int64_t multi_tensor_launches(std::int64_t elements, std::int64_t tensors, int depth) {
    const std::int64_t chunks = elements / kChunkElements + tensors;  // each tensor's last chunk is partial
    const std::int64_t by_blocks = (chunks + kBlocksPerLaunch - 1) / kBlocksPerLaunch;
    const std::int64_t per = kTensorsPerLaunch[depth - 1];
    return std::max(by_blocks, (tensors + per - 1) / per);
}

}  // namespace

std::int32_t StepBuilder::optimizer_step(const Optimized& p, Deps deps, int m) {
    const bool adam = c_.optimizer == OptimizerKind::adam;
    const bool fused = p.impl == OptimizerImpl::fused;
    // Adam reads and writes parameters, m and v and reads the gradient: 28 B per
    // parameter in one fused pass (strategy-semantics.md §8). torch's foreach
    // and for-loop run it as seven ops (adam.py): lerp_ 12 B, mul_ 8, addcmul_ 12,
    // sqrt 8, div 8, add_ 8, addcdiv_ 16: 72 B. Plain SGD: 12 B either way.
    // AdamW's decoupled weight decay first multiplies the parameters (8 B; in
    // torch 2.11's H100 trace of GPT-2 XL, 152 _foreach_mul_ launches against
    // 76 _foreach_lerp_, bench/results/cuda_hf_step.md); fused=True does it in its kernel.
    const bool decay_pass = adam && c_.decoupled_weight_decay && !fused;
    std::int64_t bytes = p.elements * ((!adam ? 12 : fused ? 28 : 72) + (decay_pass ? 8 : 0)) / 4 * p.element_bytes;
    // The unfused ops and the tensor lists each takes (its multi_tensor_apply
    // depth): Adam's seven as listed above (AdamW's mul_ first); SGD's one add_ of the gradients.
    static constexpr int kAdamDepths[] = {2, 1, 3, 2, 1, 1, 3};
    static constexpr int kAdamWDepths[] = {1, 2, 1, 3, 2, 1, 1, 3};
    static constexpr int kSgdDepths[] = {2};
    const std::span<const int> ops = !adam        ? std::span<const int>(kSgdDepths)
                                     : decay_pass ? std::span<const int>(kAdamWDepths)
                                                  : std::span<const int>(kAdamDepths);
    std::int64_t kernels = 0;
    if (fused)
        kernels = multi_tensor_launches(p.elements, p.tensors, 4);  // params, grads, m, v
    else if (p.impl == OptimizerImpl::foreach)
        for (int depth : ops) kernels += multi_tensor_launches(p.elements, p.tensors, depth);
    else
        kernels = static_cast<std::int64_t>(ops.size()) * p.tensors;
    // fp16 needs GradScaler: unscale_ and the inf/nan check read and write every gradient.
    if (c_.precision == Precision::fp16_mixed) bytes += p.elements * 8;
    const int launches = static_cast<int>(std::min<std::int64_t>(std::max<std::int64_t>(kernels - 1, 0), 1 << 30));
    const std::int32_t id =
        pass(Phase::optimizer, bytes, static_cast<double>(p.elements) * (adam ? 12 : 2), deps, m, -1, launches);
    plan_.tasks.back().optimizer_impl = p.impl;
    // A workload read from a profile prices the optimizer it measured at its
    // measured time per element (GradScaler's pass, not in that profile, aside).
    if (w_.measured_optimizer_ns_per_element > 0 && optimizer_matches(w_.measured_optimizer, c_.optimizer))
        plan_.tasks.back().fixed_ns = std::max<std::int64_t>(
            1, std::llround(static_cast<double>(p.elements) * w_.measured_optimizer_ns_per_element));
    // The temporaries live while the step runs: foreach's _foreach_sqrt result
    // over every exp_avg_sq; the for-loop's sqrt and quotient of one tensor
    // while the previous tensor's `denom` is still referenced: three of the
    // largest tensor (docs/notes/library-memory-rules.md §1). Both measured on
    // an H100 (bench/results/cuda/h100-torch_adam_step.json): foreach 4.19 B per
    // parameter; the for-loop over 5 M-element tensors 62.9 MB, three 20 MiB
    // allocator blocks.
    if (adam && !fused) {
        const std::int64_t temp =
            p.element_bytes *
            (p.impl == OptimizerImpl::foreach ? p.elements : 3 * (p.largest > 0 ? p.largest : p.elements));
        plan_.alloc(MemCategory::other, temp);
        plan_.release(MemCategory::other, temp);
    }
    return id;
}

}  // namespace dtsim::sim
