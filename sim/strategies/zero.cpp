// DeepSpeed ZeRO stages 1-3 (strategy-semantics.md §4; DeepSpeed 0.16.5).
// Stage 1/2 (§4.2): gradients go into ipg buckets of reduce_bucket_size
// elements, each bucket allreduced (use_multi_rank_bucket_allreduce), the
// optimizer updates this rank's partition, then one all-gather of all 16-bit
// parameters. Stage 3 (§4.3): every submodule's partitioned parameters are
// all-gathered before its forward and again before its backward (prefetched
// along the recorded trace), gradients are reduce-scattered from an ipg
// buffer. Offload moves the optimizer (and in stage 3 the parameters) to the
// host or NVMe. Memory follows §4.4 and §8.
#include "dtsim/common/error.hpp"
#include "dtsim/sim/step_builder.hpp"
#include "dtsim/sim/strategy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <utility>

namespace dtsim::sim {
namespace {

enum class Offload : std::uint8_t { none, cpu, nvme };

Offload offload_from(const std::string& s) {
    return s == "cpu" ? Offload::cpu : s == "nvme" ? Offload::nvme : Offload::none;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
    return (a + b - 1) / b;
}

std::int64_t elements(const Knobs& k, const char* name) {
    return static_cast<std::int64_t>(std::llround(k.number(name)));
}

// The knobs, resolved and checked against each other.
struct Zero {
    int stage = 2;
    std::int64_t bucket_elems = 0;  // reduce_bucket_size
    bool overlap = false;
    bool contiguous = true;
    bool reduce_scatter = true;
    bool multi_rank = true;
    std::int64_t prefetch_elems = 0;
    std::int64_t persistence_elems = 0;
    std::int64_t max_live_elems = 0;
    std::int64_t reuse_elems = 0;  // stage3_max_reuse_distance
    std::int64_t sub_group_elems = 0;
    Offload optimizer = Offload::none;
    Offload param = Offload::none;
    bool pinned = false;
};

Zero resolve(const Config& config, const Knobs& k, std::vector<std::string>& notes) {
    Zero z;
    const double stage = k.number("stage");
    if (stage != std::floor(stage) || stage < 1 || stage > 3)
        throw ConfigError(fmt::format(
            "--set stage={}: the ZeRO stage must be 1, 2 or 3 (stage 0 is DeepSpeed without ZeRO, plain data "
            "parallelism: use --strategy ddp)",
            k.text("stage")));
    z.stage = static_cast<int>(stage);
    z.bucket_elems = elements(k, "reduce_bucket_size");
    // overlap_comm unset means True for stage 3, False otherwise (§4.1, overlap_comm_valid).
    const std::string& overlap = k.text("overlap_comm");
    z.overlap = overlap == "auto" ? z.stage == 3 : overlap == "true";
    z.contiguous = k.boolean("contiguous_gradients");
    z.reduce_scatter = k.boolean("reduce_scatter");
    z.multi_rank = k.boolean("use_multi_rank_bucket_allreduce");
    z.prefetch_elems = elements(k, "stage3_prefetch_bucket_size");
    z.persistence_elems = elements(k, "stage3_param_persistence_threshold");
    z.max_live_elems = elements(k, "stage3_max_live_parameters");
    z.reuse_elems = elements(k, "stage3_max_reuse_distance");
    z.sub_group_elems = std::max<std::int64_t>(1, elements(k, "sub_group_size"));
    z.optimizer = offload_from(k.text("offload_optimizer"));
    z.param = offload_from(k.text("offload_param"));
    z.pinned = k.boolean("pin_memory");

    if (z.param != Offload::none && z.stage != 3)
        throw ConfigError(
            fmt::format("--set offload_param={}: parameter offload exists only in ZeRO stage 3 "
                        "(DeepSpeed's offload_param), but stage is {}; use --set stage=3",
                        k.text("offload_param"), z.stage));
    // Stages 1/2 offload only when offload_optimizer.device == cpu (engine.py
    // zero_cpu_offload); with nvme they would build DeepSpeedCPUAdam over GPU
    // tensors. NVMe optimizer offload (ZeRO-Infinity) is stage 3's.
    if (z.optimizer == Offload::nvme && z.stage != 3)
        throw ConfigError(
            fmt::format("--set offload_optimizer=nvme: stages 1 and 2 offload the optimizer to the CPU "
                        "only (DeepSpeed's zero_cpu_offload is device == cpu); NVMe needs stage=3 "
                        "(stage is {})",
                        z.stage));
    if (z.optimizer != Offload::none && config.optimizer != OptimizerKind::adam)
        throw ConfigError(
            fmt::format("--set offload_optimizer={}: the offloaded optimizer is DeepSpeedCPUAdam; "
                        "use --optimizer adam (SGD with offload is not modelled)",
                        k.text("offload_optimizer")));
    if (z.optimizer != Offload::none && z.stage < 3 && !z.contiguous) {
        z.contiguous = true;
        notes.push_back("contiguous_gradients=false is overridden: ZeRO-Offload forces contiguous gradients (§4.2).");
    }
    if (z.stage < 3)
        for (const char* name : {"stage3_prefetch_bucket_size", "stage3_param_persistence_threshold",
                                 "stage3_max_live_parameters", "stage3_max_reuse_distance", "sub_group_size"})
            if (k.is_set(name)) notes.push_back(fmt::format("{} has no effect below stage 3.", name));
    if (k.is_set("pin_memory") && z.optimizer == Offload::none && z.param == Offload::none)
        notes.push_back("pin_memory has no effect without offload_optimizer or offload_param.");
    if (k.is_set("allgather_bucket_size"))
        notes.push_back(
            "allgather_bucket_size is only used when all_gather_into_tensor is unavailable (not with NCCL): "
            "the parameter all-gather is one collective.");
    return z;
}

// A gradient in the order it becomes ready: layers in reverse, a layer's
// parameters last-defined first.
struct Grad {
    int layer = 0;
    int index = 0;           // model.parameters() index
    std::int64_t elems = 0;  // elements it adds to the ipg bucket
};

// An ipg bucket and the backward after which it is reduced: the one that
// produced the gradient that would overflow it (-1: the end of backward).
struct IpgBucket {
    std::int64_t elems = 0;
    int launch_layer = -1;
    std::size_t first = 0, last = 0;  // [first, last) into the arrival list
};

// §4.2/§4.3: a bucket is reduced when the next gradient would overflow it; a
// gradient larger than the bucket is reduced alone.
std::vector<IpgBucket> ipg_buckets(const std::vector<Grad>& grads, std::int64_t cap) {
    std::vector<IpgBucket> out;
    IpgBucket cur;
    for (std::size_t i = 0; i < grads.size(); ++i) {
        if (cur.elems > 0 && cur.elems + grads[i].elems > cap) {
            cur.launch_layer = grads[i].layer;
            cur.last = i;
            out.push_back(cur);
            cur = IpgBucket{};
            cur.first = i;
        }
        cur.elems += grads[i].elems;
    }
    if (cur.elems > 0) {
        cur.launch_layer = -1;
        cur.last = grads.size();
        out.push_back(cur);
    }
    return out;
}

// Shared state of one lowering.
struct Lowering {
    const models::Workload& w;
    const Config& config;
    const Zero& z;
    Plan& plan;
    StepBuilder& step;
    int world = 0;
    int n = 1;  // data-parallel ranks
    bool distributed = false;
    std::int64_t b = 2;  // bytes per model element: 16-bit under mixed precision
    DType dtype = DType::bf16;  // the model's (and its gradients' and collectives') element type
    std::int64_t psi = 0;
    int last = 0;                    // the accumulation-boundary micro-step
    std::vector<std::int32_t> gate;  // tasks the next compute-stream task must wait for
    std::int32_t last_compute = -1;  // the latest compute-stream task

    std::int64_t state_bytes() const {  // fp32 master + Adam m, v; SGD keeps the master only
        return config.optimizer == OptimizerKind::adam ? 12 : 4;
    }
    std::int32_t forward(int m, int l, std::int32_t dep) {
        gate.push_back(dep);
        last_compute = step.forward(m, l, gate);
        gate.clear();
        return last_compute;
    }
    std::int32_t backward(int m, int l, std::int32_t dep, std::int64_t fused) {
        gate.push_back(dep);
        last_compute = step.backward(m, l, gate, fused);
        gate.clear();
        return last_compute;
    }
    void set(MemCategory c, std::int64_t bytes) { plan.resident[static_cast<std::size_t>(c)] += bytes; }
};

std::vector<Grad> arrival_order(const models::Workload& w, bool pad, int n) {
    std::vector<Grad> out;
    for (int l = static_cast<int>(w.layers.size()) - 1; l >= 0; --l) {
        const auto& params = w.layers[static_cast<std::size_t>(l)].params;
        for (auto p = params.rbegin(); p != params.rend(); ++p)
            out.push_back({l, p->index, pad ? ceil_div(p->numel(), n) * n : p->numel()});
    }
    return out;
}

// Every parameter index, in model.parameters() order.
std::vector<int> parameters_in_order(const models::Workload& w) {
    std::vector<int> out;
    for (const auto& layer : w.layers)
        for (const auto& p : layer.params) out.push_back(p.index);
    std::sort(out.begin(), out.end());
    return out;
}

// ---------------------------------------------------------------- stages 1, 2

// Stages 1 and 2 as DeepSpeed's ZeRO optimizer runs them: the constructor lays
// out the partition, the ipg buckets, the model states and the streams;
// forward(m) and backward(m) run micro-step m (the buckets reduced from the
// gradient hooks), explain() says what ran, optimizer_step() steps the
// partition and all-gathers the updated parameters.
class Stage12 {
public:
    explicit Stage12(Lowering& s)
        : s_(s),
          z_(s.z),
          plan_(s.plan),
          step_(s.step),
          part_(ceil_div(s.psi, s.n)),  // this rank's flat partition (§4.2)
          offload_(s.z.optimizer == Offload::cpu),
          grads_(arrival_order(s.w, false, s.n)),
          buckets_(ipg_buckets(grads_, s.z.bucket_elems)),
          per_owner_(s.z.reduce_scatter && !s.z.multi_rank) {
        // One shard group: the flat partition of every parameter, in model.parameters() order.
        plan_.add_shard_group(parameters_in_order(s_.w), s_.n);
        for (std::size_t i = 0; i < buckets_.size(); ++i) {
            BucketInfo info{static_cast<int>(i), buckets_[i].elems * s_.b, {}, {}};
            for (std::size_t g = buckets_[i].first; g < buckets_[i].last; ++g) info.params.push_back(grads_[g].index);
            plan_.buckets.push_back(std::move(info));
        }
        owned_shares();
        if (per_owner_) flat_offsets();
        place_model_states();
        nccl_ = step_.stream("nccl", TaskKind::collective);
        reduction_ = z_.overlap ? step_.stream("reduction", TaskKind::collective) : nccl_;
        d2h_ = offload_ ? step_.stream("d2h", TaskKind::copy) : -1;
        h2d_ = offload_ ? step_.stream("h2d", TaskKind::copy) : -1;
        cpu_ = offload_ ? step_.stream("cpu", TaskKind::host_compute) : -1;
    }

    void forward(int m) {
        for (int l = 0; l < step_.layers(); ++l) s_.forward(m, l, -1);
    }

    // ---- backward, with the gradient hooks' bucket reductions (§4.2, §6)
    void backward(int m) {
        const auto& w = s_.w;
        // Stage 2 reduces every micro-step, stage 1 at the boundary only (§4.2, §6).
        const bool reduces = s_.distributed && (z_.stage == 2 || m == s_.last);
        // Stage 1 without overlap_comm reduces after the whole backward.
        const bool in_hooks = reduces && (z_.stage == 2 || z_.overlap);
        std::size_t next = 0;
        for (int l = step_.layers() - 1; l >= 0; --l) {
            const std::int64_t numel = w.layers[static_cast<std::size_t>(l)].param_count();
            const std::int64_t grad_bytes = numel * s_.b;
            // With contiguous_gradients each gradient is copied into the ipg buffer in its hook.
            const std::int32_t bwd = s_.backward(m, l, -1, in_hooks && z_.contiguous ? 2 * grad_bytes : 0);
            // The first gradient hook allocates the ipg buffer(s).
            if (l == step_.layers() - 1 && (z_.stage == 2 || m == s_.last))
                plan_.alloc(MemCategory::buckets, ipg_bytes_);
            if (stage1_partitions_ && m == s_.last) {
                // The boundary's hooks: the (accumulated) gradient goes into the bucket.
                if (m == 0) plan_.alloc(MemCategory::gradients, grad_bytes);
                plan_.release(MemCategory::gradients, grad_bytes);
            } else if (z_.stage == 1) {
                // Stage 1 keeps the full 16-bit gradients until the step's epilogue.
                if (m == 0) plan_.alloc(MemCategory::gradients, grad_bytes);
            } else {
                // The autograd gradient lives until it is copied into the bucket.
                plan_.alloc(MemCategory::gradients, grad_bytes);
                plan_.release(MemCategory::gradients, grad_bytes);
            }
            if (!in_hooks) continue;
            while (next < buckets_.size() && buckets_[next].launch_layer == l) reduce(next++, bwd, m);
        }
        if (reduces) {
            while (next < buckets_.size()) reduce(next++, s_.last_compute, m);
            // The epilogue synchronizes the reduction stream before the next forward.
            s_.gate.assign(1, last_reduction_);
        } else if (!s_.distributed && (z_.stage == 2 || m == s_.last)) {
            // One rank: nothing to reduce; the epilogue follows the last backward.
            plan_.alloc(MemCategory::gradients, partition_grad_bytes_);
            epilogue(m);
        }
        if (offload_ && !s_.distributed && m == s_.last) {
            // One rank: no reduction, the partition (everything) still goes to the host.
            const std::int32_t after[] = {s_.last_compute};
            offload_copies_.push_back(step_.copy(Transfer::d2h, 4 * part_, d2h_, after, m, z_.pinned));
        }
        if (m == s_.last) step_deps_ = {s_.last_compute, last_reduction_};
    }

    void explain() {
        if (!s_.distributed) return;
        plan_.notes.push_back(fmt::format(
            "ZeRO stage {}: {} ipg bucket(s) of up to {:.3g} elements, each {}{}; then one all-gather of the 16-bit "
            "parameters after the step (about 1.5x DDP's bytes in 16-bit, §4.2).",
            z_.stage, buckets_.size(), double(z_.bucket_elems),
            per_owner_ ? "reduced to its owners (one reduce per owner)" : "allreduced whole",
            z_.stage == 1 ? (z_.overlap ? ", at the accumulation boundary in the hooks"
                                        : ", at the accumulation boundary after the whole backward (no overlap)")
            : z_.overlap  ? " every micro-step on a side stream (one reduction overlaps compute)"
                          : " every micro-step, blocking the compute stream (no overlap)"));
    }

    // ---- the step (§4.2): the partition's optimizer, then the all-gather of the 16-bit parameters
    void optimizer_step() {
        const std::int32_t updated = offload_ ? host_step() : device_step();
        if (s_.distributed) {
            // all_gather_dp_groups: one all-gather of every 16-bit parameter (S = b * part * N).
            const std::int32_t deps[] = {updated};
            step_.collective(CollectiveKind::allgather, s_.b * part_ * s_.n, s_.world, nccl_, deps, s_.last, -1,
                             s_.dtype);
            plan_.set_role(CollectiveRole::parameter_gather, {0});
        }
    }

private:
    // This rank's share of each bucket, for the offload copies (the partition
    // spread over the buckets in proportion; sums to `part`).
    void owned_shares() {
        own_.assign(buckets_.size(), 0);
        std::int64_t cum = 0, prev = 0;
        for (std::size_t i = 0; i < buckets_.size(); ++i) {
            cum += buckets_[i].elems;
            const std::int64_t upto = i + 1 == buckets_.size() ? part_
                                                               : static_cast<std::int64_t>(static_cast<double>(cum) *
                                                                                           static_cast<double>(part_) /
                                                                                           static_cast<double>(s_.psi));
            own_[i] = upto - prev;
            prev = upto;
        }
    }

    // Flat offsets in model.parameters() order, for per-owner reduces.
    void flat_offsets() {
        std::vector<std::int64_t> numel;
        for (const auto& layer : s_.w.layers)
            for (const auto& p : layer.params) {
                if (p.index >= static_cast<int>(numel.size())) numel.resize(static_cast<std::size_t>(p.index) + 1, 0);
                numel[static_cast<std::size_t>(p.index)] = p.numel();
            }
        offset_.assign(numel.size() + 1, 0);
        for (std::size_t i = 0; i < numel.size(); ++i) offset_[i + 1] = offset_[i] + numel[i];
    }

    void place_model_states() {
        // Resident model states (§4.4, §8): 16-bit parameters on every rank.
        s_.set(MemCategory::parameters, s_.b * s_.psi);
        if (offload_) {
            s_.set(MemCategory::host, 16 * part_);  // fp32 gradients, master, m, v on the host
        } else {
            s_.set(MemCategory::optimizer_states, s_.state_bytes() * part_);
        }
        // Transient (§4.2, §8): backward() allocates 1 ipg buffer of reduce_bucket_size
        // elements, 2 with overlap_comm, at the first gradient hook of a micro-step that
        // reduces; stage 2 copies its partition's gradients into grads_in_partition
        // (Psi/N x b) from the first reduction. The epilogue (_release_ipg_buffers)
        // drops both; micro-step 0's partition gradients stay referenced by
        // averaged_gradients until the step flattens them.
        ipg_bytes_ = z_.contiguous ? z_.bucket_elems * s_.b * (z_.overlap ? 2 : 1) : 0;
        // Stage 1 with overlap_comm and contiguous_gradients registers stage 2's
        // hooks: at the accumulation boundary each gradient is copied into the ipg
        // bucket and freed (reduce_independent_p_g_buckets_and_remove_grads), and
        // copy_grads_in_partition keeps only this rank's share, as stage 2 does
        // (docs/notes/library-memory-rules.md §3a; Lightning's deepspeed_stage_1).
        // Without them the full 16-bit gradients stay until the step.
        stage1_partitions_ = z_.stage == 1 && z_.overlap && z_.contiguous && s_.distributed && !offload_;
        partition_grad_bytes_ = (z_.stage == 2 || stage1_partitions_) && !offload_ ? s_.b * part_ : 0;
    }

    // The epilogue of micro-step m, attached to the task just added (the last reduction).
    void epilogue(int m) {
        plan_.release(MemCategory::buckets, ipg_bytes_);
        if (m > 0 && z_.stage == 2) plan_.release(MemCategory::gradients, partition_grad_bytes_);
    }

    // Reduces one bucket after task `ready` (§4.2 "What actually runs").
    void reduce(std::size_t bi, std::int32_t ready, int m) {
        const IpgBucket& bk = buckets_[bi];
        const std::int64_t bytes = bk.elems * s_.b;
        const std::int32_t previous = last_reduction_;
        std::int32_t dep = ready;
        if (!z_.contiguous) {
            // Without the contiguous buffer the bucket is flattened on the compute stream.
            const std::int32_t deps[] = {ready};
            dep = step_.pass(Phase::gradient_copy, 2 * bytes, 0, deps, m);
            plan_.alloc(MemCategory::buckets, bytes);
            s_.last_compute = dep;
        }
        const std::int32_t deps[] = {dep};
        // allreduce_bucket first flattens the bucket into a new tensor
        // (_flatten_dense_tensors), alive while the bucket's reduction runs: up to
        // one bucket more (§3b). Without contiguous_gradients that flat copy is the
        // compute-stream pass above.
        const std::int64_t flat_copy = z_.contiguous ? bytes : 0;
        if (per_owner_) {
            // One dist.reduce per rank owning part of the bucket, of that rank's share.
            std::vector<std::int64_t> share(static_cast<std::size_t>(s_.n), 0);
            for (std::size_t g = bk.first; g < bk.last; ++g) {
                std::int64_t lo = offset_[static_cast<std::size_t>(grads_[g].index)];
                const std::int64_t hi = lo + grads_[g].elems;
                while (lo < hi) {
                    const std::int64_t owner = std::min<std::int64_t>(lo / part_, s_.n - 1);
                    const std::int64_t end = std::min(hi, (owner + 1) * part_);
                    share[static_cast<std::size_t>(owner)] += end - lo;
                    lo = end;
                }
            }
            for (std::size_t r = 0; r < share.size(); ++r) {
                if (share[r] == 0) continue;
                // The first waits for the bucket; the rest follow on the stream.
                const std::span<const std::int32_t> after =
                    last_reduction_ == previous ? std::span<const std::int32_t>(deps) : std::span<const std::int32_t>();
                const bool first = last_reduction_ == previous;
                last_reduction_ = step_.collective(CollectiveKind::reduce, share[r] * s_.b, s_.world, reduction_, after,
                                                   m, static_cast<int>(bi), s_.dtype);
                if (first) plan_.alloc(MemCategory::other, flat_copy);
            }
            plan_.release(MemCategory::other, flat_copy);
        } else {
            // use_multi_rank_bucket_allreduce (and reduce_scatter=false): one allreduce of the whole bucket.
            last_reduction_ = step_.collective(CollectiveKind::allreduce, bytes, s_.world, reduction_, deps, m,
                                               static_cast<int>(bi), s_.dtype);
            plan_.set_role(CollectiveRole::bucket);
            plan_.alloc(MemCategory::other, flat_copy);
            plan_.release(MemCategory::other, flat_copy);
        }
        if (!z_.contiguous) plan_.release(MemCategory::buckets, bytes);
        if (bi == 0) plan_.alloc(MemCategory::gradients, partition_grad_bytes_);  // grads_in_partition's first use
        if (bi + 1 == buckets_.size()) epilogue(m);
        // Overlap: before the next bucket the compute stream waits for the
        // previous reduction, so at most one overlaps compute. Without
        // overlap_comm the reduction blocks the compute stream.
        const std::int32_t wait_for = z_.overlap ? previous : last_reduction_;
        if (wait_for >= 0) s_.gate.push_back(wait_for);
        if (offload_) {
            // ZeRO-Offload: this rank's slice is cast .float() and copied D2H (4 B
            // per element); with accumulation each earlier micro-step round-trips
            // the accumulated fp32 gradient (async_accumulate_grad_in_cpu_via_gpu).
            const std::int32_t after[] = {last_reduction_};
            std::int32_t c = -1;
            if (m > 0) c = step_.copy(Transfer::h2d, 4 * own_[bi], h2d_, after, m, z_.pinned);
            const std::int32_t after_h2d[] = {c >= 0 ? c : last_reduction_};
            c = step_.copy(Transfer::d2h, 4 * own_[bi], d2h_, after_h2d, m, z_.pinned);
            offload_copies_.push_back(c);
        }
    }

    // FusedAdam on the device; returns the pass that writes the 16-bit partition.
    std::int32_t device_step() {
        // Flatten and cast the partition's gradients to fp32 (transient 4 B per element).
        std::int32_t t = step_.pass(Phase::gradient_copy, (s_.b + 4) * part_, 0, step_deps_, s_.last);
        plan_.alloc(MemCategory::other, 4 * part_);
        // The flattened fp32 copy replaces the 16-bit gradients: stage 1's full
        // gradients, stage 2's first micro-step partition buffer.
        plan_.release(MemCategory::gradients,
                      z_.stage == 1 && !stage1_partitions_ ? s_.b * s_.psi : partition_grad_bytes_);
        const std::int32_t cast[] = {t};
        t = step_.optimizer_step({.elements = part_, .largest = part_}, cast, s_.last);  // FusedAdam
        const std::int32_t opt[] = {t};
        // Copy the fp32 master partition into the 16-bit partition.
        const std::int32_t updated = step_.pass(Phase::optimizer, (4 + s_.b) * part_, 0, opt, s_.last);
        plan_.release(MemCategory::other, 4 * part_);
        return updated;
    }

    // DeepSpeedCPUAdam on the host, then the partition back to the device.
    std::int32_t host_step() {
        std::vector<std::int32_t> deps = offload_copies_;
        deps.push_back(step_deps_[0]);
        const std::int32_t adam = step_.host_optimizer(part_, cpu_, deps, s_.last);
        if (z_.stage == 1) {
            // The full gradients are freed at the epilogue; attach to the CPU step's start.
            plan_.release(MemCategory::gradients, s_.b * s_.psi);
        }
        // DeepSpeed 0.16.5 copies the fp32 partition to the GPU (4 B per element,
        // plus an fp32 transient) and casts it there. Version note (§4.2): before
        // PR #5301 and after PR #7309 the copy is 2 B per element.
        const std::int32_t after_adam[] = {adam};
        const std::int32_t up = step_.copy(Transfer::h2d, 4 * part_, h2d_, after_adam, s_.last, z_.pinned);
        plan_.alloc(MemCategory::other, 4 * part_);
        const std::int32_t after_up[] = {up};
        const std::int32_t updated = step_.pass(Phase::optimizer, (4 + s_.b) * part_, 0, after_up, s_.last);
        plan_.release(MemCategory::other, 4 * part_);
        plan_.notes.push_back(
            "offload_optimizer=cpu: D2H 4 B and H2D 4 B per partition element per step (DeepSpeed 0.16.5; 2 B H2D "
            "before PR #5301 and after PR #7309), DeepSpeedCPUAdam over the partition on the host.");
        return updated;
    }

    Lowering& s_;
    const Zero& z_;
    Plan& plan_;
    StepBuilder& step_;
    const std::int64_t part_;
    const bool offload_;
    const std::vector<Grad> grads_;
    const std::vector<IpgBucket> buckets_;
    const bool per_owner_;
    std::vector<std::int64_t> own_;     // this rank's elements of each bucket
    std::vector<std::int64_t> offset_;  // per-owner reduces: each parameter's flat offset
    std::int64_t ipg_bytes_ = 0;
    bool stage1_partitions_ = false;
    std::int64_t partition_grad_bytes_ = 0;
    int nccl_ = -1, reduction_ = -1, d2h_ = -1, h2d_ = -1, cpu_ = -1;
    // Where the step stands.
    std::int32_t last_reduction_ = -1;
    std::vector<std::int32_t> offload_copies_;
    std::vector<std::int32_t> step_deps_;
};

void lower_stage12(Lowering& s) {
    Stage12 zero(s);
    for (int m = 0; m <= s.last; ++m) {
        zero.forward(m);
        zero.backward(m);
    }
    zero.explain();
    zero.optimizer_step();
}

// ------------------------------------------------------------------- stage 3

// DeepSpeed's per-submodule host work in stage 3: the pre-forward/pre-backward
// hook (fetch_sub_module: trace bookkeeping, PartitionedParameterCoordinator's
// prefetch scan, event queue) and the post hook (release_sub_module), in
// Python. Unverified estimate: 100 us per submodule per fetch + release (about 60 us
// fetch, 40 us release; not measured here).
constexpr std::int64_t kStage3HookNs = 100'000;

struct Layer3 {
    std::int64_t gather_elems = 0;   // non-persistent elements (ds_numel), what prefetch counts
    std::int64_t gather_padded = 0;  // the same, each tensor padded to N: the all-gather's elements
    std::int64_t part_elems = 0;     // this rank's partitions of them
    std::uint32_t gathered_begin = 0, gathered_count = 0;  // their tensors' shard groups, in layer_tensors
};

// Stage 3 as DeepSpeed's ZeRO-3 runs it: the constructor partitions every
// tensor, builds the ipg buckets, the model states, the streams and the fetch
// trace; forward(m) and backward(m) run micro-step m (each submodule's fetch
// hook gathers and prefetches, backward's hooks reduce-scatter the buckets);
// optimizer_step() steps the partition per sub-group and gathers the persistent
// tensors again; explain() says what ran.
class Stage3 {
public:
    explicit Stage3(Lowering& s)
        : s_(s),
          z_(s.z),
          plan_(s.plan),
          step_(s.step),
          nl_(s.step.layers()),
          offload_opt_(s.z.optimizer != Offload::none),
          offload_param_(s.z.param != Offload::none),
          // Iteration 1 records the trace and cannot prefetch.
          prefetch_(s.config.iteration > 1) {
        partition_tensors();
        grads_ = arrival_order(s_.w, true, s_.n);
        buckets_ = ipg_buckets(grads_, z_.bucket_elems);
        for (std::size_t i = 0; i < buckets_.size(); ++i) {
            BucketInfo info{static_cast<int>(i), buckets_[i].elems * s_.b, {}, {}};
            for (std::size_t g = buckets_[i].first; g < buckets_[i].last; ++g) info.params.push_back(grads_[g].index);
            plan_.buckets.push_back(std::move(info));
        }
        place_model_states();
        ag_ = step_.stream("all-gather", TaskKind::collective);
        rs_ = step_.stream("reduce-scatter", TaskKind::collective);
        d2h_ = offload_opt_ ? step_.stream("d2h", TaskKind::copy) : -1;
        h2d_ = offload_opt_ || offload_param_ ? step_.stream("h2d", TaskKind::copy) : -1;
        // The host: the submodule hooks and, with optimizer offload, the CPU step.
        cpu_ = step_.stream("cpu", TaskKind::host_compute);
        nvme_ = z_.optimizer == Offload::nvme || z_.param == Offload::nvme ? step_.stream("nvme", TaskKind::io) : -1;
        keep_within_reuse_distance();
        fetch_trace();
        gathered_.assign(trace_.size(), -1);
    }

    // ---- forward: each submodule fetched (gathered, prefetching along the trace), then released
    void forward(int m) {
        begin_micro_step();
        for (int l = 0; l < nl_; ++l) {
            const int pos = fwd_pos_[static_cast<std::size_t>(l)];
            s_.forward(m, l, fetch(m, pos));
            if (!kept_[static_cast<std::size_t>(l)] && !held_[static_cast<std::size_t>(l)]) release(l, pos);
        }
    }

    // ---- backward: fetched again where released, gradients reduce-scattered from the hooks
    void backward(int m) {
        std::size_t next = 0;
        for (int l = nl_ - 1; l >= 0; --l) {
            const auto li = static_cast<std::size_t>(l);
            const int pos = bwd_pos_[li];
            const std::int64_t grad_bytes = s_.w.layers[li].param_count() * s_.b;
            // Each gradient is copied into the ipg buffer in its hook (fused). A
            // held layer is still gathered from forward: its hook gathers nothing.
            const std::int32_t bwd =
                s_.backward(m, l, fetch(m, pos, held_[li] != 0), s_.distributed ? 2 * grad_bytes : 0);
            release(l, kept_[li] || held_[li] ? fwd_pos_[li] : pos);
            held_[li] = 0;
            plan_.alloc(MemCategory::gradients, grad_bytes);
            plan_.release(MemCategory::gradients, grad_bytes);
            if (!s_.distributed) continue;
            while (next < buckets_.size() && buckets_[next].launch_layer == l) reduce(m, next++, bwd);
        }
        if (s_.distributed) {
            while (next < buckets_.size()) reduce(m, next++, s_.last_compute);
            // The epilogue synchronizes the reduce stream.
            s_.gate.assign(1, reductions_.back());
            if (offload_opt_) s_.gate.push_back(offload_copies_.back());
        }
    }

    // ---- the step, per sub-group of <= sub_group_size elements (§4.3)
    // It starts with _partition_all_parameters (release_and_reset_all), which
    // frees every gathered parameter, the persistent ones included; _post_step
    // gathers those again (docs/notes/library-memory-rules.md §4).
    void optimizer_step() {
        const std::int64_t regathered_bytes = s_.distributed ? s_.b * persist_ : 0;
        std::vector<std::int32_t> deps = {s_.last_compute};
        if (!reductions_.empty()) deps.push_back(reductions_.back());
        if (!offload_copies_.empty()) deps.push_back(offload_copies_.back());
        std::int32_t done = -1;
        for (std::int64_t begin = 0; begin < part_; begin += z_.sub_group_elems) {
            const std::int64_t g = std::min(z_.sub_group_elems, part_ - begin);
            if (!offload_opt_) {
                // Cast the gradients to fp32, update, copy the master into the 16-bit partition.
                std::int32_t t = step_.pass(Phase::gradient_copy, (s_.b + 4) * g, 0, deps, s_.last);
                plan_.alloc(MemCategory::other, 4 * g);
                if (begin == 0) plan_.release(MemCategory::parameters, regathered_bytes);
                const std::int32_t cast[] = {t};
                t = step_.optimizer_step({.elements = g, .largest = g}, cast, s_.last);  // FusedAdam
                const std::int32_t opt[] = {t};
                done = step_.pass(Phase::optimizer, (4 + s_.b) * g, 0, opt, s_.last);
                plan_.release(MemCategory::other, 4 * g);
            } else {
                if (z_.optimizer == Offload::nvme) {
                    // ZeRO-Infinity: swap fp32 master, m, v in from NVMe (12 B per element).
                    deps.assign(1, step_.nvme(Transfer::nvme_read, 12 * g, nvme_, deps, s_.last));
                }
                done = step_.host_optimizer(g, cpu_, deps, s_.last);
                if (begin == 0) plan_.release(MemCategory::parameters, regathered_bytes);
                const std::int32_t adam[] = {done};
                if (z_.optimizer == Offload::nvme) step_.nvme(Transfer::nvme_write, 12 * g, nvme_, adam, s_.last);
                // copy_ fp32 (host) -> 16-bit (device) converts on the CPU: 2 B per
                // element H2D. With offload_param the update stays on the host.
                if (!offload_param_) done = step_.copy(Transfer::h2d, s_.b * g, h2d_, adam, s_.last, z_.pinned);
            }
            deps.assign(1, done);
        }
        // _post_step: persistent_parameters[0].all_gather(persistent_parameters) ->
        // _allgather_params_coalesced, which issues one all_gather_into_tensor per
        // tensor (not one flat buffer, as the fetch path does), waits for the last
        // and synchronizes: latency-bound gathers, one per small tensor.
        if (s_.distributed) {
            const std::int32_t after[] = {done};
            for (const Persistent& p : persistent_) {
                step_.collective(CollectiveKind::allgather, s_.b * p.padded, s_.world, ag_, after, s_.last, -1,
                                 s_.dtype);
                plan_.set_role(CollectiveRole::parameter_gather, {p.group});
                plan_.alloc(MemCategory::parameters, s_.b * p.numel);
            }
        }
    }

    void explain() {
        if (s_.distributed) {
            std::int64_t ag_elems = 0;
            for (const auto& li : layers_) ag_elems += li.gather_padded;
            std::size_t forward_gathers = 0;
            for (int pos : fwd_pos_) forward_gathers += pos >= 0;
            plan_.notes.push_back(fmt::format(
                "ZeRO stage 3: {} submodules gathered before forward ({:.3g} elements), {} of them again before "
                "backward (the others are reused within stage3_max_reuse_distance={:.3g} and stay gathered), {} "
                "reduce-scatter(s) per micro-step, {} persistent elements in {} tensors (<= {} each) kept whole and "
                "gathered again after the step, one all-gather per tensor, {:.0f} us of host hooks per submodule "
                "fetch{}.",
                forward_gathers, double(ag_elems), trace_.size() - forward_gathers, double(z_.reuse_elems),
                buckets_.size(), persist_, persistent_.size(), z_.persistence_elems, double(kStage3HookNs) / 1e3,
                prefetch_ ? "" : "; iteration 1 records the fetch trace, so nothing is prefetched or kept"));
        }
        if (offload_opt_)
            plan_.notes.push_back(fmt::format(
                "offload_optimizer={}: D2H 4 B per partition element of gradients, {} over the partition on the "
                "host{}.",
                z_.optimizer == Offload::cpu ? "cpu" : "nvme",
                z_.optimizer == Offload::nvme ? "NVMe swap-in/out (12 B each way) around DeepSpeedCPUAdam"
                                              : "DeepSpeedCPUAdam",
                offload_param_ ? "; the update stays on the host (offload_param)" : ", H2D 2 B per element back"));
    }

private:
    // Each persistent tensor: its shard group, elements and padded elements, in parameter order.
    struct Persistent {
        std::int32_t group = 0;
        std::int64_t numel = 0, padded = 0;
    };

    // Per-tensor partitioning (§4.3): ceil(numel / N) each; tensors with
    // <= stage3_param_persistence_threshold elements persist whole on every rank.
    // Every tensor is its own shard group: group p holds parameter p.
    void partition_tensors() {
        const auto& w = s_.w;
        layers_.assign(static_cast<std::size_t>(nl_), Layer3{});
        std::size_t tensors = 0;
        for (const auto& layer : w.layers) tensors += layer.params.size();
        plan_.shards.resize(tensors);
        plan_.shard_params.resize(tensors);
        layer_tensors_.reserve(tensors);
        for (int l = 0; l < nl_; ++l)
            for (const auto& p : w.layers[static_cast<std::size_t>(l)].params) {
                DTSIM_ASSERT(p.index >= 0 && static_cast<std::size_t>(p.index) < tensors,
                             "parameter indices are 0..N-1");
                const auto g = static_cast<std::size_t>(p.index);
                plan_.shards[g] = {static_cast<std::uint32_t>(g), 1, s_.n};
                plan_.shard_params[g] = p.index;
                const std::int64_t numel = p.numel(), pn = ceil_div(numel, s_.n);
                part_ += pn;
                if (numel <= z_.persistence_elems) {
                    persist_ += numel;
                    persistent_.push_back({p.index, numel, pn * s_.n});
                } else {
                    auto& li = layers_[static_cast<std::size_t>(l)];
                    li.gather_elems += numel;
                    li.gather_padded += pn * s_.n;
                    li.part_elems += pn;
                    if (li.gathered_count == 0) li.gathered_begin = static_cast<std::uint32_t>(layer_tensors_.size());
                    DTSIM_ASSERT(li.gathered_begin + li.gathered_count == layer_tensors_.size(),
                                 "a layer's tensors in a row");
                    layer_tensors_.push_back(p.index);
                    ++li.gathered_count;
                }
            }
    }

    // Resident (§4.4, §8): 16-bit partitions, their gradients, fp32 master + Adam
    // states: 16 B per partition element, plus the persistent tensors whole.
    void place_model_states() {
        s_.set(MemCategory::parameters, s_.b * persist_ + (offload_param_ ? 0 : s_.b * part_));
        if (offload_param_) s_.set(MemCategory::host, z_.param == Offload::cpu ? s_.b * part_ : 0);
        if (!offload_opt_) {
            s_.set(MemCategory::gradients, s_.b * part_);
            s_.set(MemCategory::optimizer_states, s_.state_bytes() * part_);
        } else if (z_.optimizer == Offload::cpu) {
            s_.set(MemCategory::host, 16 * part_);  // fp32 gradients, master, m, v
        } else {
            // NVMe holds master, m and v; the host keeps fp32 gradients and swap
            // buffers (buffer_count 4 sub-groups of fp32).
            s_.set(MemCategory::host, 4 * part_ + 4 * 4 * std::min(part_, z_.sub_group_elems));
        }
        if (z_.param == Offload::nvme)
            s_.set(MemCategory::host, std::min(s_.b * part_, 5 * 100'000'000 * s_.b));  // buffer_count 5 x 1e8
        // The ipg flat buffer is allocated once (§4.3).
        s_.set(MemCategory::buckets, z_.bucket_elems * s_.b);
    }

    // stage3_max_reuse_distance (§4.3, __params_to_release): with a complete
    // trace, release_sub_module after forward keeps a layer's parameters when
    // they recur in the trace within max_reuse_distance elements of fetched
    // submodules. Layer l's next use is its backward, after the forwards and
    // backwards of every later layer: kept iff 2 x (elements of layers > l) < distance.
    void keep_within_reuse_distance() {
        kept_.assign(static_cast<std::size_t>(nl_), 0);
        if (!s_.distributed || !prefetch_) return;
        std::int64_t later = 0;
        for (int l = nl_ - 1; l >= 0; --l) {
            kept_[static_cast<std::size_t>(l)] = 2 * later < z_.reuse_elems;
            later += s_.w.layers[static_cast<std::size_t>(l)].param_count();
        }
    }

    // The fetch trace of one micro-step: forward order, then backward order
    // (layers with nothing to gather, or still gathered from forward, are skipped).
    void fetch_trace() {
        fwd_pos_.assign(static_cast<std::size_t>(nl_), -1);
        bwd_pos_.assign(static_cast<std::size_t>(nl_), -1);
        if (!s_.distributed) return;
        for (int l = 0; l < nl_; ++l)
            if (layers_[static_cast<std::size_t>(l)].gather_elems > 0) {
                fwd_pos_[static_cast<std::size_t>(l)] = static_cast<int>(trace_.size());
                trace_.push_back(l);
            }
        for (int l = nl_ - 1; l >= 0; --l)
            if (layers_[static_cast<std::size_t>(l)].gather_elems > 0 && !kept_[static_cast<std::size_t>(l)]) {
                bwd_pos_[static_cast<std::size_t>(l)] = static_cast<int>(trace_.size());
                trace_.push_back(l);
            }
    }

    void begin_micro_step() {
        issued_ = 0;
        live_ = 0;
        gate_compute_ = gate_gather_ = -1;
        events_.clear();
        event_head_ = 0;
        rs_head_ = reductions_.size();
        hook_ = -1;
        available_.assign(static_cast<std::size_t>(nl_), 0);
        held_.assign(static_cast<std::size_t>(nl_), 0);
    }

    // The all-gather of trace position `pos` (with offload_param, its partition
    // read and copied to the device first).
    void issue(int m, std::size_t pos) {
        available_[static_cast<std::size_t>(trace_[pos])] = 1;
        const Layer3& li = layers_[static_cast<std::size_t>(trace_[pos])];
        std::int32_t deps[] = {gate_compute_, gate_gather_, hook_};
        std::int32_t prev = -1;
        if (offload_param_) {
            // The 16-bit partition lives off the device: read from NVMe, copy H2D, then gather (§4.3).
            if (z_.param == Offload::nvme) {
                prev = step_.nvme(Transfer::nvme_read, s_.b * li.part_elems, nvme_, deps, m);
                deps[0] = prev;
                deps[1] = -1;
            }
            // A pageable .to(device) is synchronous: the host blocks until it is
            // done, so it cannot run ahead of the compute already issued (the
            // previous compute task) and nothing after it is issued earlier.
            if (!z_.pinned) deps[2] = s_.last_compute;
            prev = step_.copy(Transfer::h2d, s_.b * li.part_elems, h2d_, deps, m, z_.pinned);
            plan_.alloc(MemCategory::gathered, s_.b * li.part_elems);
            if (!z_.pinned) {
                s_.gate.push_back(prev);
                hook_ = prev;
            }
            deps[0] = prev;
            deps[1] = -1;
            deps[2] = hook_;
        }
        gathered_[pos] =
            step_.collective(CollectiveKind::allgather, s_.b * li.gather_padded, s_.world, ag_, deps, m, -1, s_.dtype);
        plan_.set_role(CollectiveRole::parameter_gather,
                       std::span<const std::int32_t>(layer_tensors_.data() + li.gathered_begin, li.gathered_count));
        plan_.alloc(MemCategory::gathered, s_.b * li.gather_padded);
        if (offload_param_) plan_.release(MemCategory::gathered, s_.b * li.part_elems);
        live_ += li.gather_elems;
    }

    // fetch_sub_module (§4.3): gather what is missing, prefetch along the
    // trace, then wait. Returns the all-gather the compute waits for.
    // reuse: the submodule is held from forward (see held_): nothing to
    // gather, but its hook still prefetches along the trace.
    std::int32_t fetch(int m, int pos_i, bool reuse = false) {
        // The submodule's hook runs on the host after the previous compute's
        // issue; the all-gathers it issues and the compute wait for it.
        const std::int32_t after[] = {s_.last_compute};
        hook_ = step_.host_task(kStage3HookNs, cpu_, after, m);
        s_.gate.push_back(hook_);
        if (pos_i < 0) return -1;
        const auto pos = static_cast<std::size_t>(pos_i);
        if (!reuse && issued_ <= pos) {
            issue(m, pos);
            issued_ = pos + 1;
        }
        if (prefetch_) {
            const std::int64_t limit = std::min(z_.max_live_elems - live_, z_.prefetch_elems);
            std::int64_t prefetching = 0;
            while (issued_ < trace_.size() && prefetching < limit) {
                const auto l = static_cast<std::size_t>(trace_[issued_]);
                if (available_[l]) {
                    held_[l] = 1;  // its later (backward) use reuses this gather
                } else {
                    issue(m, issued_);
                    prefetching += layers_[l].gather_elems;
                }
                ++issued_;
            }
        }
        if (reuse) return -1;
        if (events_.size() - event_head_ > 2) {
            gate_compute_ = events_[event_head_].compute;
            gate_gather_ = events_[event_head_].gather;
            ++event_head_;
        }
        events_.push_back({s_.last_compute, gathered_[pos]});
        return gathered_[pos];
    }

    void release(int l, int pos) {
        if (pos < 0) return;
        available_[static_cast<std::size_t>(l)] = 0;
        const Layer3& li = layers_[static_cast<std::size_t>(l)];
        plan_.release(MemCategory::gathered, s_.b * li.gather_padded);
        live_ -= li.gather_elems;
    }

    void reduce(int m, std::size_t bi, std::int32_t ready) {
        // max_param_reduce_events = 2: with more than 2 reductions pending the
        // host waits for the oldest before issuing, so at most 3 are in flight.
        if (reductions_.size() - rs_head_ > 2) s_.gate.push_back(reductions_[rs_head_++]);
        const std::int64_t bytes = buckets_[bi].elems * s_.b;
        const std::int32_t deps[] = {ready};
        // reduce_scatter_coalesced flattens the bucket into its input (transient).
        const std::int32_t r = step_.collective(CollectiveKind::reduce_scatter, bytes, s_.world, rs_, deps, m,
                                                static_cast<int>(bi), s_.dtype);
        plan_.set_role(CollectiveRole::gradient_reduce, plan_.buckets[bi].params);
        plan_.alloc(MemCategory::buckets, bytes);
        plan_.release(MemCategory::buckets, bytes);
        reductions_.push_back(r);
        if (offload_opt_) {
            // The partition's gradients go .float() to the host: 4 B per element (§4.3).
            const std::int32_t after[] = {r};
            offload_copies_.push_back(
                step_.copy(Transfer::d2h, 4 * ceil_div(buckets_[bi].elems, s_.n), d2h_, after, m, z_.pinned));
        }
    }

    Lowering& s_;
    const Zero& z_;
    Plan& plan_;
    StepBuilder& step_;
    const int nl_;
    const bool offload_opt_, offload_param_, prefetch_;
    // The partition.
    std::vector<Layer3> layers_;
    std::int64_t part_ = 0, persist_ = 0;
    std::vector<Persistent> persistent_;
    std::vector<std::int32_t> layer_tensors_;  // each layer's non-persistent tensors (Layer3::gathered_*)
    std::vector<Grad> grads_;
    std::vector<IpgBucket> buckets_;
    int ag_ = -1, rs_ = -1, d2h_ = -1, h2d_ = -1, cpu_ = -1, nvme_ = -1;
    std::vector<char> kept_;  // kept gathered from forward to backward (reuse distance)
    std::vector<int> trace_;
    std::vector<int> fwd_pos_, bwd_pos_;
    std::vector<std::int32_t> gathered_;
    std::vector<std::int32_t> reductions_, offload_copies_;
    // Where the micro-step stands.
    std::size_t issued_ = 0;  // trace positions [0, issued_) have their all-gather issued
    std::int64_t live_ = 0;   // gathered or in-flight elements (__n_available_params)
    // Host gate: the compute-stream point the host last synchronized on
    // (__max_ongoing_fetch_events = 2: at most 3 fetch events pending).
    std::int32_t gate_compute_ = -1, gate_gather_ = -1;
    struct Event {
        std::int32_t compute, gather;
    };
    std::vector<Event> events_;
    std::size_t event_head_ = 0;
    std::size_t rs_head_ = 0;
    std::int32_t hook_ = -1;  // the host hook of the submodule being fetched
    // Layers whose parameters are gathered or in flight (ds_status not
    // NOT_AVAILABLE), and layers the prefetcher passed over in that state
    // on their backward use: fetch_sub_module's prefetch loop skips such a
    // parameter, records the skipped use, and __params_to_release then keeps
    // it gathered after forward, so its backward needs no all-gather
    // (DeepSpeed partitioned_param_coordinator.py, fetch_sub_module and
    // __params_to_release).
    std::vector<char> available_, held_;
};

void lower_stage3(Lowering& s) {
    Stage3 zero(s);
    for (int m = 0; m <= s.last; ++m) {
        zero.forward(m);
        zero.backward(m);
    }
    zero.optimizer_step();
    zero.explain();
}

Plan lower_zero(const models::Workload& w, const Config& config, const Knobs& knobs) {
    Plan plan;
    const Zero z = resolve(config, knobs, plan.notes);
    const std::size_t expected = w.layers.size() * 5 * static_cast<std::size_t>(config.grad_accum) + 64;
    plan.tasks.reserve(expected);
    plan.deps.reserve(expected * 2);
    plan.memory.reserve(expected * 3);
    StepBuilder step(plan, w, config);
    // DeepSpeed's bf16/fp16 modes cast the model itself to 16 bits and run
    // without torch.autocast: no autocast weight copies.
    step.set_autocast(false);
    const int n = config.topology.world_size();
    Lowering s{.w = w,
               .config = config,
               .z = z,
               .plan = plan,
               .step = step,
               .world = step.world_group(),
               .n = n,
               .distributed = n > 1,
               .b = config.precision == Precision::fp32 ? 4 : 2,  // ZeRO keeps the model in the 16-bit dtype
               .dtype = compute_dtype(config.precision),
               .psi = w.param_count(),
               .last = config.grad_accum - 1,
               .gate = {},
               .last_compute = -1};
    if (z.stage == 3)
        lower_stage3(s);
    else
        lower_stage12(s);
    return plan;
}

}  // namespace

void register_zero(Registry<Strategy>& r) {
    Strategy s;
    s.lower = lower_zero;
    // DeepSpeed's bf16/fp16 engine converts the module and runs it without
    // torch.autocast (see lower_zero's set_autocast(false)).
    s.autocast = [](const Config&, const Knobs&) { return models::Autocast::none; };
    // DeepSpeed's names and defaults (strategy-semantics.md §4.1). The stage
    // defaults to 2, as Lightning's "deepspeed" (DeepSpeed's own default, 0,
    // is no ZeRO at all).
    const std::vector<std::string> devices = {"none", "cpu", "nvme"};
    s.knobs = {
        {.name = "stage",
         .type = KnobType::number,
         .default_value = "2",
         .description = "ZeRO stage: 1 optimizer states, 2 + gradients, 3 + parameters",
         .min_value = 1},
        {.name = "reduce_bucket_size",
         .type = KnobType::number,
         .default_value = "500000000",
         .description = "ipg bucket size in elements (gradients reduced per collective)",
         .min_exclusive = true},
        {.name = "allgather_bucket_size",
         .type = KnobType::number,
         .default_value = "500000000",
         .description = "elements per all-gather (only without all_gather_into_tensor)",
         .min_exclusive = true},
        {.name = "overlap_comm",
         .type = KnobType::choice,
         .default_value = "auto",
         .description = "reduce on a side stream; auto = true for stage 3, false otherwise",
         .choices = {"auto", "true", "false"}},
        {.name = "contiguous_gradients",
         .type = KnobType::boolean,
         .default_value = "true",
         .description = "copy gradients into the contiguous ipg buffer as they are produced"},
        {.name = "reduce_scatter",
         .type = KnobType::boolean,
         .default_value = "true",
         .description = "stages 1/2: false means a plain allreduce of each bucket"},
        {.name = "use_multi_rank_bucket_allreduce",
         .type = KnobType::boolean,
         .default_value = "true",
         .description = "stages 1/2: one allreduce per bucket; false: one reduce per owning rank"},
        {.name = "stage3_prefetch_bucket_size",
         .type = KnobType::number,
         .default_value = "50000000",
         .description = "stage 3: elements prefetched ahead along the trace"},
        {.name = "stage3_param_persistence_threshold",
         .type = KnobType::number,
         .default_value = "100000",
         .description = "stage 3: tensors with <= this many elements stay whole on every rank"},
        {.name = "stage3_max_live_parameters",
         .type = KnobType::number,
         .default_value = "1000000000",
         .description = "stage 3: cap on gathered elements"},
        {.name = "stage3_max_reuse_distance",
         .type = KnobType::number,
         .default_value = "1000000000",
         .description = "stage 3: keep a parameter gathered after forward if it is reused within this many elements"},
        {.name = "sub_group_size",
         .type = KnobType::number,
         .default_value = "1000000000",
         .description = "stage 3: optimizer-step tile in elements",
         .min_exclusive = true},
        {.name = "offload_optimizer",
         .type = KnobType::choice,
         .default_value = "none",
         .description = "optimizer states and step on the host (cpu; nvme: stage 3)",
         .choices = devices},
        {.name = "offload_param",
         .type = KnobType::choice,
         .default_value = "none",
         .description = "stage 3: 16-bit parameter partitions on the host",
         .choices = devices},
        {.name = "pin_memory",
         .type = KnobType::boolean,
         .default_value = "false",
         .description = "page-locked host buffers for offload copies"},
    };
    r.add("deepspeed", "DeepSpeed ZeRO stages 1-3 with optimizer/parameter offload (DeepSpeed 0.16.5 semantics)", s);
}

}  // namespace dtsim::sim
