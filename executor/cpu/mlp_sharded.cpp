// Train mode for the sharded strategies: the MLP of mlp_train.cpp under FSDP
// (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD) and DeepSpeed ZeRO stages 1-3, fp32.
// Each rank keeps only its shards of the parameters, of the averaged
// gradients and of the optimizer state, split as the plan's shard groups say;
// the plan's collectives move the real data, as their roles say (nothing here
// knows which strategy built the plan):
//   - all-gather: the shards of an FSDP unit's flat parameter, of a ZeRO-3
//     layer's (or the persistent) tensors, or ZeRO 1/2's whole flat partition
//     after the step, assembled into the full parameters the layers compute with;
//   - reduce-scatter (FSDP, ZeRO-3): the padded flat gradient summed, each rank
//     receiving its shard, divided by the world size;
//   - allreduce (ZeRO 1/2 buckets, FSDP NO_SHARD units): summed, divided, then
//     the rank's slice kept.
// The buffers live as torch's do:
//   - an all-gather writes a flat parameter allocated for it (a copy of its
//     own, so that it may run while layers still compute with the copy
//     before), and the layers compute with views of it; where the plan frees
//     it (FSDP's reshard, ZeRO-3's release) it is freed after the last task
//     computing with it, else kept for the next all-gather (ZeRO 1/2);
//   - a reduce-scatter sends the flat gradient its unit's flatten pass built,
//     and its output becomes the rank's gradient shard.
// The optimizer steps the shards only. A layer computing with a freed copy
// fails, and ZeRO 1/2's kept copy is poisoned (NaN) after the step until its
// all-gather (not under the torch allocator), so a missing or misrouted
// all-gather shows. Every collective's bytes must equal the real buffer's.
#include "adam.hpp"
#include "cpu_backend.hpp"
#include "mlp_sharding.hpp"

#include "dtsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

namespace dtsim::executor::cpu {
namespace {

using sim::CollectiveKind;
using sim::Phase;
using sim::TaskKind;
using Sharding = MlpTrainer::Sharding;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
    return (a + b - 1) / b;
}

// Calls fn(parameter, first element, flat position, count) for the parameter
// pieces of the group's flat range [begin, begin + count), clipped to numel.
template <class Fn>
void for_each_piece(const Sharding::Group& g, std::int64_t begin, std::int64_t count, Fn&& fn) {
    const std::int64_t end = std::min(begin + count, g.numel);
    for (std::size_t i = 0; i < g.params.size() && begin < end; ++i) {
        const std::int64_t lo = g.offsets[i];
        const std::int64_t hi = i + 1 < g.params.size() ? g.offsets[i + 1] : g.numel;
        if (hi <= begin) continue;
        const std::int64_t piece = std::min(hi, end) - begin;
        fn(g.params[i], begin - lo, begin, piece);
        begin += piece;
    }
}

// dst[0, k) = `scale` x the sum of micro-steps [from, m]'s gradients of
// parameter p, from its element `first`.
void summed_gradient(const Sharding& s, int p, std::int64_t first, std::int64_t k, std::size_t from, std::size_t m,
                     float scale, float* dst) {
    for (std::size_t j = from; j <= m; ++j) {
        const auto& grad = s.slots[j][static_cast<std::size_t>(p)];
        DTSIM_ASSERT(static_cast<std::int64_t>(grad.size()) >= first + k,
                     "a reduced gradient was computed in backward");
        const float* src = grad.data() + first;
        if (j == from)
            for (std::int64_t e = 0; e < k; ++e) dst[e] = src[e] * scale;
        else
            for (std::int64_t e = 0; e < k; ++e) dst[e] += src[e] * scale;
    }
}

// The groups' flat gradient as a reduce-scatter sends it (rank-major: rank r's
// shard of each group in turn): micro-steps [from, m]'s gradients summed and
// multiplied by `scale`, the padding zero.
void flat_gradient(const Sharding& s, const std::vector<int>& groups, std::size_t from, std::size_t m, float scale,
                   float* out) {
    const int n = s.groups[static_cast<std::size_t>(groups.front())].n;
    std::size_t at = 0;
    for (int r = 0; r < n; ++r)
        for (int g : groups) {
            const auto& gr = s.groups[static_cast<std::size_t>(g)];
            const std::int64_t begin = r * gr.shard;
            for_each_piece(gr, begin, gr.shard, [&](int p, std::int64_t first, std::int64_t flat, std::int64_t k) {
                summed_gradient(s, p, first, k, from, m, scale, out + at + static_cast<std::size_t>(flat - begin));
            });
            const std::int64_t real = std::clamp<std::int64_t>(gr.numel - begin, 0, gr.shard);
            std::fill(out + at + static_cast<std::size_t>(real), out + at + static_cast<std::size_t>(gr.shard), 0.0f);
            at += static_cast<std::size_t>(gr.shard);
        }
}

// The group's gradient shard ready to add into: allocated (if freed) and
// zeroed at the step's first reduction into it.
void begin_adding(Sharding::Group& gr) {
    if (gr.grad_set) return;
    if (gr.grad.empty()) gr.grad = FreshFloats(static_cast<std::size_t>(gr.shard));
    std::fill_n(gr.grad.data(), gr.grad.size(), 0.0f);
    gr.grad_set = true;
}

std::int64_t total_bytes(const Sharding& s, const std::vector<int>& groups) {
    std::int64_t b = 0;
    for (int g : groups) {
        const auto& gr = s.groups[static_cast<std::size_t>(g)];
        b += 4 * gr.shard * gr.n;
    }
    return b;
}

// Where the real buffers live and die, as the plan says: which copy of its
// shard groups' parameters each all-gather writes and each layer computes
// with; which groups are transient (their all-gathers allocate the plan's
// gathered memory) and which task last computes with each of their copies;
// which flatten pass builds each reduce-scatter's input.
void place_buffers(const sim::Plan& plan, Sharding& s, int layers) {
    const auto& tasks = plan.tasks;
    const std::size_t n = tasks.size();
    // FSDP2's copy-outs: each follows the all-gather it copies (its one dependency).
    for (std::size_t i = 0; i < n; ++i) {
        auto& a = s.actions[i];
        if (a.op != Sharding::Op::copy_out) continue;
        const auto deps = plan.deps_of(tasks[i]);
        DTSIM_ASSERT(deps.size() == 1, fmt::format("copy-out task {} follows one all-gather", i));
        auto& gather = s.actions[static_cast<std::size_t>(deps[0])];
        DTSIM_ASSERT(gather.op == Sharding::Op::gather && gather.groups.size() == 1,
                     fmt::format("copy-out task {} copies one group's all-gather", i));
        gather.staged = true;
        a.staged_from = deps[0];
    }
    std::vector<int> copies(s.groups.size(), 0);
    for (std::size_t i = 0; i < n; ++i) {
        auto& a = s.actions[i];
        if (a.op != Sharding::Op::gather) continue;
        bool allocates = false;
        for (const sim::MemoryDelta& d : plan.memory_of(tasks[i]))
            allocates = allocates || (d.category == sim::MemCategory::gathered && d.bytes > 0);
        for (int g : a.groups) {
            a.copies.push_back(copies[static_cast<std::size_t>(g)]++);
            s.groups[static_cast<std::size_t>(g)].transient |= allocates;
        }
    }
    for (std::size_t g = 0; g < s.groups.size(); ++g) s.groups[g].copies.resize(static_cast<std::size_t>(copies[g]));
    // A layer computes with the copy of the latest all-gather before it; before
    // the first, with the last of the step before (ZeRO 1/2 gather after the step).
    std::vector<int> current(s.groups.size());
    for (std::size_t g = 0; g < s.groups.size(); ++g) current[g] = copies[g] - 1;
    std::vector<std::vector<int>> last_use(s.groups.size());
    for (std::size_t g = 0; g < s.groups.size(); ++g) last_use[g].assign(static_cast<std::size_t>(copies[g]), -1);
    for (std::size_t i = 0; i < n; ++i) {
        auto& a = s.actions[i];
        if (a.op == Sharding::Op::gather) {
            for (std::size_t k = 0; k < a.groups.size(); ++k)
                current[static_cast<std::size_t>(a.groups[k])] = a.copies[k];
        } else if ((a.op == Sharding::Op::forward || a.op == Sharding::Op::backward) && tasks[i].layer < layers) {
            const int l = tasks[i].layer;
            for (const int p : {2 * l, 2 * l + 1}) {
                const auto g = static_cast<std::size_t>(s.loc[static_cast<std::size_t>(p)].group);
                const int copy = current[g];
                (p == 2 * l ? a.weight_copy : a.bias_copy) = copy;
                if (copy >= 0) last_use[g][static_cast<std::size_t>(copy)] = static_cast<int>(i);
            }
        }
    }
    for (std::size_t g = 0; g < s.groups.size(); ++g) {
        if (!s.groups[g].transient) continue;
        for (std::size_t k = 0; k < last_use[g].size(); ++k)
            if (last_use[g][k] >= 0)
                s.actions[static_cast<std::size_t>(last_use[g][k])].release.push_back(
                    {static_cast<int>(g), static_cast<int>(k)});
    }
    // A reduce-scatter's input: the flatten pass among its dependencies, past the division passes.
    for (std::size_t i = 0; i < n; ++i) {
        auto& a = s.actions[i];
        if (a.op != Sharding::Op::reduce_scatter) continue;
        const auto deps = plan.deps_of(tasks[i]);
        std::vector<int> todo(deps.begin(), deps.end());
        while (!todo.empty()) {
            const int j = todo.back();
            todo.pop_back();
            auto& from = s.actions[static_cast<std::size_t>(j)];
            if (from.op == Sharding::Op::divide) {
                const auto more = plan.deps_of(tasks[static_cast<std::size_t>(j)]);
                todo.insert(todo.end(), more.begin(), more.end());
            } else if (from.op == Sharding::Op::flatten) {
                DTSIM_ASSERT(from.groups.empty(), fmt::format("flatten task {} feeds one reduce-scatter", j));
                DTSIM_ASSERT(tasks[static_cast<std::size_t>(j)].bytes == 2 * total_bytes(s, a.groups),
                             fmt::format("flatten task {} copies the {} bytes task {} reduce-scatters", j,
                                         total_bytes(s, a.groups), i));
                from.groups = a.groups;
                a.flat_from = j;
                break;
            }
        }
    }
}

// All-gathers the groups' shards into `out` (full parameters by index).
void gather_groups(const Sharding& s, const std::vector<int>& groups, runtime::Communicator& comm,
                   std::vector<std::vector<float>>& out) {
    if (groups.empty()) return;
    const int n = s.groups[static_cast<std::size_t>(groups.front())].n;
    DTSIM_ASSERT(comm.size() == n, "the all-gather's group is the shard group");
    std::int64_t count = 0;
    for (int g : groups) {
        DTSIM_ASSERT(s.groups[static_cast<std::size_t>(g)].n == n, "one all-gather, one shard group");
        count += s.groups[static_cast<std::size_t>(g)].shard;
    }
    std::vector<float> send, recv(static_cast<std::size_t>(count * n));
    send.reserve(static_cast<std::size_t>(count));
    for (int g : groups) {
        const auto& p = s.groups[static_cast<std::size_t>(g)].param;
        send.insert(send.end(), p.begin(), p.end());
    }
    comm.allgather(send.data(), recv.data(), count);
    std::size_t at = 0;
    for (int r = 0; r < n; ++r)
        for (int g : groups) {
            const auto& gr = s.groups[static_cast<std::size_t>(g)];
            for_each_piece(
                gr, r * gr.shard, gr.shard, [&](int p, std::int64_t first, std::int64_t flat, std::int64_t k) {
                    std::copy_n(
                        recv.begin() + static_cast<std::ptrdiff_t>(at + static_cast<std::size_t>(flat - r * gr.shard)),
                        k, out[static_cast<std::size_t>(p)].begin() + first);
                });
            at += static_cast<std::size_t>(gr.shard);
        }
}

}  // namespace

void check_sharded_train(const sim::Plan& plan, const models::Workload& w, const sim::Config& config) {
    (void)mlp_shape(w);
    const auto fail = [](const std::string& what) {
        return ConfigError(fmt::format("train mode cannot run {}; use --mode replay for it.", what));
    };
    if (config.precision != sim::Precision::fp32)
        throw fail(fmt::format("--precision {} (mixed precision; train mode runs fp32 only)",
                               sim::to_string(config.precision)));
    if (config.activation_checkpointing) throw fail("activation checkpointing");
    if (plan.compute_dtype != DType::fp32)
        throw fail(fmt::format("layers computing in {} (mixed precision, e.g. FSDP's param_dtype)",
                               to_string(plan.compute_dtype)));
    for (const auto& t : plan.tasks) {
        if (t.kind == TaskKind::copy || t.kind == TaskKind::io)
            throw fail(
                "copies to and from the host or NVMe (offload: FSDP's cpu_offload, DeepSpeed's "
                "offload_optimizer or offload_param)");
        if (t.kind == TaskKind::host_compute && (t.elements > 0 || t.fixed_ns == 0))
            throw fail("an optimizer step on the host (offload: DeepSpeed's offload_optimizer, FSDP's cpu_offload)");
        if (t.kind == TaskKind::compute && t.layer < 0 && t.phase != Phase::optimizer &&
            t.phase != Phase::gradient_copy && t.phase != Phase::compression && t.phase != Phase::parameter_copy)
            throw fail(fmt::format("{} passes", sim::to_string(t.phase)));
        if (t.kind == TaskKind::compute && t.phase == Phase::recompute) throw fail("recompute passes");
        if (t.kind != TaskKind::collective) continue;
        if (t.collective != CollectiveKind::allgather && t.collective != CollectiveKind::reduce_scatter &&
            t.collective != CollectiveKind::allreduce)
            throw fail(
                fmt::format("{} collectives (e.g. DeepSpeed's per-owner reduces, "
                            "use_multi_rank_bucket_allreduce=false)",
                            calib::to_string(t.collective)));
        if (t.dtype != DType::fp32)
            throw fail(fmt::format("{} collectives (mixed precision, e.g. FSDP's param_dtype or reduce_dtype)",
                                   to_string(t.dtype)));
        if (t.role == sim::CollectiveRole::other)
            throw fail(
                fmt::format("a {} that moves no shard group or bucket (e.g. hybrid sharding's "
                            "all-reduce across nodes)",
                            calib::to_string(t.collective)));
    }
}

MlpTrainer::~MlpTrainer() = default;

MlpTrainer::MlpTrainer(const sim::Plan& plan, const models::Workload& w, const sim::Config& config,
                       const ExecOptions& options, int rank, int world)
    : MlpTrainer(w, config, options, rank, world, plan.buckets.size()) {
    if (plan.shards.empty()) return;  // DDP: every rank holds the whole model
    check_sharded_train(plan, w, config);
    auto s = std::make_unique<Sharding>();
    const int params = static_cast<int>(params_.size());
    const int micro_steps = config.grad_accum;
    const int last = micro_steps - 1;

    // ---- shard groups, as the plan splits the parameters
    for (const sim::ShardGroup& pg : plan.shards) {
        Sharding::Group g;
        const auto members = plan.params_of(pg);
        g.params.assign(members.begin(), members.end());
        g.n = pg.ranks;
        DTSIM_ASSERT(g.n == 1 || g.n == world, "a shard group spans one rank or all");
        g.index = g.n == 1 ? 0 : rank;
        for (int p : g.params) {
            DTSIM_ASSERT(p >= 0 && p < params, "a shard group holds the model's parameters");
            g.offsets.push_back(g.numel);
            g.numel += static_cast<std::int64_t>(params_[static_cast<std::size_t>(p)].size());
        }
        g.shard = ceil_div(g.numel, g.n);
        s->groups.push_back(std::move(g));
    }
    s->loc.resize(static_cast<std::size_t>(params));
    for (std::size_t g = 0; g < s->groups.size(); ++g) {
        auto& gr = s->groups[g];
        for (std::size_t i = 0; i < gr.params.size(); ++i)
            s->loc[static_cast<std::size_t>(gr.params[i])] = {static_cast<int>(g), gr.offsets[i]};
        const auto shard = static_cast<std::size_t>(gr.shard);
        gr.param.assign(shard, 0.0f);  // the gradient shard comes with the first reduction
        if (adam_) {
            gr.m.assign(shard, 0.0f);
            gr.v.assign(shard, 0.0f);
        }
        for_each_piece(gr, gr.index * gr.shard, gr.shard,
                       [&](int p, std::int64_t first, std::int64_t flat, std::int64_t count) {
                           std::copy_n(params_[static_cast<std::size_t>(p)].begin() + first, count,
                                       gr.param.begin() + (flat - gr.index * gr.shard));
                       });
    }
    for (int p = 0; p < params; ++p)
        DTSIM_ASSERT(s->loc[static_cast<std::size_t>(p)].group >= 0, "every parameter is in a shard group");
    s->slots.assign(static_cast<std::size_t>(micro_steps), grads_);

    // ---- what each task does: its kind and phase, and for collectives the role and shard groups the plan gives
    const auto& tasks = plan.tasks;
    s->tasks = tasks.data();
    s->actions.resize(tasks.size());
    bool optimizer_seen = false;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
        const auto& t = tasks[i];
        auto& a = s->actions[i];
        if (t.kind == TaskKind::compute) {
            if (t.layer >= 0)
                a.op = t.phase == Phase::backward ? Sharding::Op::backward : Sharding::Op::forward;
            else if (t.phase == Phase::gradient_copy && t.fresh_output)
                a.op = Sharding::Op::flatten;
            else if (t.phase == Phase::compression)
                a.op = Sharding::Op::divide;  // FSDP's _div_if_needed
            else if (t.phase == Phase::parameter_copy)
                a.op = Sharding::Op::copy_out;  // FSDP2's foreach_all_gather_copy_out
            else if (t.phase == Phase::optimizer && t.flops > 0 && !optimizer_seen) {
                a.op = Sharding::Op::optimizer;  // the whole shard's step (ZeRO-3's later sub-groups: nothing)
                optimizer_seen = true;
            } else {
                a.op = Sharding::Op::nothing;  // gradient casts and master copies: one fp32 tensor here
            }
            continue;
        }
        if (t.kind != TaskKind::collective) continue;  // ZeRO-3's host hooks replay (they spin)
        const int group_size = plan.groups[static_cast<std::size_t>(t.group)].size;
        const auto moved = plan.shards_of(i);
        a.groups.assign(moved.begin(), moved.end());
        switch (t.role) {
            case sim::CollectiveRole::parameter_gather:
                DTSIM_ASSERT(t.collective == CollectiveKind::allgather && !a.groups.empty(),
                             "a parameter gather all-gathers shard groups");
                a.op = Sharding::Op::gather;
                s->gathers = true;
                break;
            case sim::CollectiveRole::gradient_reduce:
                DTSIM_ASSERT(!a.groups.empty(), "a gradient reduction names its shard groups");
                if (t.collective == CollectiveKind::reduce_scatter) {
                    a.op = Sharding::Op::reduce_scatter;
                } else {
                    // An allreduce of whole groups (FSDP NO_SHARD): their parameters, each rank keeping its slice.
                    a.op = Sharding::Op::allreduce;
                    for (int g : a.groups) {
                        const auto& members = s->groups[static_cast<std::size_t>(g)].params;
                        a.params.insert(a.params.end(), members.begin(), members.end());
                    }
                    a.groups.clear();
                }
                break;
            case sim::CollectiveRole::bucket:
                // A bucket reduced whole (ZeRO 1/2): its gradients, each rank keeping its slice.
                DTSIM_ASSERT(t.collective == CollectiveKind::allreduce && t.bucket >= 0 &&
                                 t.bucket < static_cast<int>(plan.buckets.size()),
                             "a bucket reduction allreduces a known bucket");
                a.op = Sharding::Op::allreduce;
                a.params = plan.buckets[static_cast<std::size_t>(t.bucket)].params;
                break;
            default:
                DTSIM_ASSERT(false, fmt::format("task {}: a sharded plan's collective moves shard groups or a bucket, "
                                                "not {}",
                                                i, sim::to_string(t.role)));
        }
        if (a.op != Sharding::Op::gather) {
            s->reductions = true;
            if (t.micro_step < last) s->every_micro_step = true;
        }
        // The executor and the simulator must agree on what moves.
        std::int64_t bytes = 0;
        int n = group_size;
        if (!a.groups.empty()) {
            bytes = total_bytes(*s, a.groups);
            n = s->groups[static_cast<std::size_t>(a.groups.front())].n;
        } else {
            for (int p : a.params) bytes += 4 * static_cast<std::int64_t>(params_[static_cast<std::size_t>(p)].size());
            n = world;
        }
        DTSIM_ASSERT(bytes == t.bytes, fmt::format("task {} ({} of {} bytes in the plan) moves {} real bytes", i,
                                                   calib::to_string(t.collective), t.bytes, bytes));
        DTSIM_ASSERT(n == group_size, fmt::format("task {} runs over {} ranks, the shards over {}", i, group_size, n));
    }
    DTSIM_ASSERT(optimizer_seen, "the plan steps the optimizer");
    if (!s->gathers)
        for (const auto& g : s->groups) DTSIM_ASSERT(g.n == 1, "sharded parameters are all-gathered");
    place_buffers(plan, *s, shape_.layers);
    sharding_ = std::move(s);
}

namespace {
volatile float g_flatten_sink = 0;    // keeps the copies
volatile float g_unit_factor = 1.0f;  // read at run time, so the multiply stays
std::atomic<float> g_divide_sink{0};  // keeps the divisions (they run on the reductions' stream threads)
}  // namespace

void MlpTrainer::divide_in_place(std::int64_t elements) {
    const auto n = static_cast<std::size_t>(elements);
    if (n == 0) return;
    // One buffer per stream thread: the predivide and postdivide passes may run
    // on different streams (HYBRID_SHARD: the shard group's and the all-reduce's).
    thread_local std::vector<float> divided;
    if (divided.size() < n) divided.assign(n, 1.0f);
    const float factor = g_unit_factor;
    for (std::size_t i = 0; i < n; ++i) divided[i] *= factor;
    g_divide_sink.store(divided[n / 2], std::memory_order_relaxed);
}

void MlpTrainer::flatten(std::int64_t bytes) {
    const auto n = static_cast<std::size_t>(bytes / 4);
    if (n == 0) return;
    if (flatten_from_.size() < n) flatten_from_.assign(n, 1.0f);
    if (fresh_gradients_) {
        // torch's cat allocates its output: the copy faults its pages in.
        const std::unique_ptr<float[]> fresh(new float[n]);
        std::memcpy(fresh.get(), flatten_from_.data(), n * sizeof(float));
        g_flatten_sink = fresh[n / 2];
        return;
    }
    flatten_into_.resize(n);
    std::memcpy(flatten_into_.data(), flatten_from_.data(), n * sizeof(float));
    g_flatten_sink = flatten_into_[n / 2];
}

// The reduction of micro-step m sends that micro-step's gradient, or the sum
// of all so far when only the last micro-step reduces (no_sync, stage 1).
std::size_t MlpTrainer::first_reduced_micro_step(std::size_t m) const {
    return sharding_->every_micro_step ? m : 0;
}

bool MlpTrainer::run_sharded(int task, runtime::Communicator* comm) {
    if (!sharding_) return false;
    Sharding& s = *sharding_;
    DTSIM_ASSERT(task >= 0 && task < static_cast<int>(s.actions.size()), "the task is the plan's");
    const sim::Task& t = s.tasks[task];
    Sharding::Action& a = s.actions[static_cast<std::size_t>(task)];
    const auto m = static_cast<std::size_t>(t.micro_step);
    const std::size_t from = first_reduced_micro_step(m);
    const float inv = 1.0f / static_cast<float>(world_);
    switch (a.op) {
        case Sharding::Op::replay: return false;
        case Sharding::Op::nothing: return true;
        case Sharding::Op::flatten:
            if (a.groups.empty()) {
                flatten(t.bytes / 2);
            } else {
                // The unit's flat gradient (torch.cat of its views' gradients: a
                // new tensor), its reduce-scatter's input. It is divided by the
                // world size here, in the copy, so that the reduction averages;
                // the plan's division passes run beside it at that size.
                const auto size = static_cast<std::size_t>(t.bytes / 2 / 4);
                if (fresh_gradients_ || a.flat.size() != size) a.flat = FreshFloats(size);
                flat_gradient(s, a.groups, from, m, inv, a.flat.data());
                // The views' gradients go once concatenated (under the torch
                // allocator), so that the next unit's come from the memory they free.
                if (fresh_gradients_)
                    for (int g : a.groups)
                        for (int p : s.groups[static_cast<std::size_t>(g)].params)
                            for (std::size_t j = from; j <= m; ++j)
                                Gradient().swap(s.slots[j][static_cast<std::size_t>(p)]);
            }
            return true;
        case Sharding::Op::divide: divide_in_place(static_cast<std::int64_t>(t.flops)); return true;
        case Sharding::Op::forward:
        case Sharding::Op::backward: {
            const int l = t.layer;
            const bool model = l < shape_.layers;  // else the loss
            const auto weight = model ? sharded_param(2 * l, a.weight_copy) : std::span<const float>();
            if (a.op == Sharding::Op::forward)
                forward_with(t.micro_step, l, weight, model ? sharded_param(2 * l + 1, a.bias_copy) : weight);
            else
                backward_into(t.micro_step, l, weight, s.slots[m]);
            // FSDP's reshard, ZeRO-3's release: the copies last computed with are freed.
            for (const auto& c : a.release)
                s.groups[static_cast<std::size_t>(c.group)].copies[static_cast<std::size_t>(c.copy)] = {};
            return true;
        }
        case Sharding::Op::optimizer: sharded_step(t.optimizer_impl); return true;
        case Sharding::Op::gather: all_gather(task, *comm); return true;
        case Sharding::Op::copy_out: {
            // The all-gather output copied into the unsharded parameters (allocated
            // afresh when the plan frees them between uses), then freed.
            auto& gather = s.actions[static_cast<std::size_t>(a.staged_from)];
            auto& gr = s.groups[static_cast<std::size_t>(gather.groups.front())];
            auto& c = gr.copies[static_cast<std::size_t>(gather.copies.front())];
            if (gr.transient || c.size() != gather.staging.size()) c = FreshFloats(gather.staging.size());
            std::copy_n(gather.staging.data(), gather.staging.size(), c.data());
            gather.staging = {};
            return true;
        }
        case Sharding::Op::reduce_scatter: reduce_scatter(task, *comm); return true;
        case Sharding::Op::allreduce: {
            std::size_t total = 0;
            for (int p : a.params) total += params_[static_cast<std::size_t>(p)].size();
            FreshFloats flat(total);
            std::size_t filled = 0;
            for (int p : a.params) {
                const auto numel = static_cast<std::int64_t>(params_[static_cast<std::size_t>(p)].size());
                summed_gradient(s, p, 0, numel, from, m, 1.0f, flat.data() + filled);
                filled += static_cast<std::size_t>(numel);
            }
            comm->allreduce_sum(flat.data(), static_cast<std::int64_t>(flat.size()));
            std::size_t at = 0;
            for (int p : a.params) {
                const auto& l = s.loc[static_cast<std::size_t>(p)];
                auto& gr = s.groups[static_cast<std::size_t>(l.group)];
                begin_adding(gr);
                const std::int64_t lo = gr.index * gr.shard,
                                   numel = static_cast<std::int64_t>(params_[static_cast<std::size_t>(p)].size());
                for (std::int64_t e = 0; e < numel; ++e) {
                    const std::int64_t f = l.offset + e;
                    if (f >= lo && f < lo + gr.shard)
                        gr.grad[static_cast<std::size_t>(f - lo)] += flat[at + static_cast<std::size_t>(e)] * inv;
                }
                at += static_cast<std::size_t>(numel);
            }
            return true;
        }
    }
    return false;
}

// Parameter p as a layer computes with it: a view of its group's all-gathered
// `copy`, or params_ (no all-gather writes it, or ZeRO 1/2's first step,
// before its first all-gather).
std::span<const float> MlpTrainer::sharded_param(int p, int copy) const {
    const auto pi = static_cast<std::size_t>(p);
    if (copy < 0) return params_[pi];
    const auto& l = sharding_->loc[pi];
    const auto& gr = sharding_->groups[static_cast<std::size_t>(l.group)];
    const FreshFloats& c = gr.copies[static_cast<std::size_t>(copy)];
    if (c.empty()) {
        DTSIM_ASSERT(!gr.transient, fmt::format("parameter {} is all-gathered before a layer computes with it", p));
        return params_[pi];
    }
    return {c.data() + l.offset, params_[pi].size()};
}

// _all_gather_flat_param: each group's unsharded flat parameter allocated
// afresh (_alloc_storage) when the plan frees it between uses, kept otherwise,
// written by the all-gather; the layers then compute with views of it.
void MlpTrainer::all_gather(int task, runtime::Communicator& comm) {
    Sharding& s = *sharding_;
    const Sharding::Action& a = s.actions[static_cast<std::size_t>(task)];
    const int n = s.groups[static_cast<std::size_t>(a.groups.front())].n;
    DTSIM_ASSERT(comm.size() == n, "the all-gather's group is the shard group");
    std::int64_t count = 0;
    for (int g : a.groups) {
        const auto& gr = s.groups[static_cast<std::size_t>(g)];
        DTSIM_ASSERT(gr.n == n, "one all-gather, one shard group");
        count += gr.shard;
    }
    const auto unsharded = [&](std::size_t k) -> float* {
        auto& gr = s.groups[static_cast<std::size_t>(a.groups[k])];
        auto& c = gr.copies[static_cast<std::size_t>(a.copies[k])];
        const auto size = static_cast<std::size_t>(gr.shard * gr.n);
        if (gr.transient || c.size() != size) c = FreshFloats(size);
        return c.data();
    };
    if (a.groups.size() == 1) {
        float* out = nullptr;
        if (a.staged) {  // FSDP2: into the all-gather output; its copy-out fills the parameters
            auto& staging = s.actions[static_cast<std::size_t>(task)].staging;
            staging = FreshFloats(static_cast<std::size_t>(count * n));
            out = staging.data();
        } else {
            out = unsharded(0);
        }
        comm.allgather(s.groups[static_cast<std::size_t>(a.groups.front())].param.data(), out, count);
        return;
    }
    // Several groups in one call (ZeRO-3's tensors of a layer): their shards
    // side by side, then each rank's pieces into each group's flat parameter.
    FreshFloats send(static_cast<std::size_t>(count)), recv(static_cast<std::size_t>(count * n));
    std::size_t at = 0;
    for (int g : a.groups) {
        const auto& p = s.groups[static_cast<std::size_t>(g)].param;
        std::copy(p.begin(), p.end(), send.data() + at);
        at += p.size();
    }
    comm.allgather(send.data(), recv.data(), count);
    std::vector<float*> full(a.groups.size());
    for (std::size_t k = 0; k < a.groups.size(); ++k) full[k] = unsharded(k);
    at = 0;
    for (int r = 0; r < n; ++r)
        for (std::size_t k = 0; k < a.groups.size(); ++k) {
            const std::int64_t shard = s.groups[static_cast<std::size_t>(a.groups[k])].shard;
            std::copy_n(recv.data() + at, shard, full[k] + r * shard);
            at += static_cast<std::size_t>(shard);
        }
}

// _reduce_grad: the flat gradient reduce-scattered; the output, allocated
// afresh (empty_like), becomes the rank's gradient shard, or is added to the
// one kept from an earlier micro-step (_accumulate_sharded_grad).
void MlpTrainer::reduce_scatter(int task, runtime::Communicator& comm) {
    Sharding& s = *sharding_;
    Sharding::Action& a = s.actions[static_cast<std::size_t>(task)];
    const int n = s.groups[static_cast<std::size_t>(a.groups.front())].n;
    DTSIM_ASSERT(comm.size() == n, "the reduce-scatter's group is the shard group");
    std::int64_t count = 0;
    for (int g : a.groups) count += s.groups[static_cast<std::size_t>(g)].shard;
    const auto size = static_cast<std::size_t>(count * n);
    FreshFloats built;
    FreshFloats* input = &built;
    if (a.flat_from >= 0) {
        input = &s.actions[static_cast<std::size_t>(a.flat_from)].flat;
        DTSIM_ASSERT(input->size() == size,
                     fmt::format("flatten task {} built reduce-scatter task {}'s input", a.flat_from, task));
    } else {
        built = FreshFloats(size);
        const auto m = static_cast<std::size_t>(s.tasks[task].micro_step);
        flat_gradient(s, a.groups, first_reduced_micro_step(m), m, 1.0f / static_cast<float>(world_), built.data());
    }
    auto& first = s.groups[static_cast<std::size_t>(a.groups.front())];
    if (a.groups.size() == 1 && !first.grad_set) {
        if (fresh_gradients_ || first.grad.empty()) first.grad = FreshFloats(static_cast<std::size_t>(first.shard));
        comm.reduce_scatter_sum(input->data(), first.grad.data(), count);
        first.grad_set = true;
    } else {
        FreshFloats recv(static_cast<std::size_t>(count));
        comm.reduce_scatter_sum(input->data(), recv.data(), count);
        std::size_t at = 0;
        for (int g : a.groups) {
            auto& gr = s.groups[static_cast<std::size_t>(g)];
            begin_adding(gr);
            for (std::size_t e = 0; e < gr.grad.size(); ++e) gr.grad[e] += recv[at + e];
            at += gr.grad.size();
        }
    }
    // The unsharded gradient goes once reduced.
    if (fresh_gradients_) *input = {};
}

void MlpTrainer::sharded_step(sim::OptimizerImpl impl) {
    Sharding& s = *sharding_;
    for (auto& gr : s.groups) begin_adding(gr);  // a gradient nothing was reduced into: zero
    if (!s.reductions)                           // one rank: nothing reduced, every gradient is this rank's
        for (auto& gr : s.groups)
            for_each_piece(gr, 0, gr.numel, [&](int p, std::int64_t first, std::int64_t flat, std::int64_t k) {
                for (const auto& slot : s.slots)
                    for (std::int64_t e = 0; e < k; ++e)
                        gr.grad[static_cast<std::size_t>(flat + e)] +=
                            slot[static_cast<std::size_t>(p)][static_cast<std::size_t>(first + e)];
            });
    if (!adam_) {
        const auto lr = static_cast<float>(lr_);
        for (auto& gr : s.groups)
            for (std::size_t i = 0; i < gr.param.size(); ++i) gr.param[i] -= lr * gr.grad[i];
    } else {
        // One flat tensor per group, as FSDP's flat parameters and ZeRO's partitions.
        std::vector<AdamTensor> tensors;
        tensors.reserve(s.groups.size());
        for (auto& gr : s.groups) tensors.push_back({gr.param, gr.grad.span(), gr.m, gr.v});
        adam_step(tensors, ++adam_t_, lr_, impl);
    }
    // zero_grad(set_to_none=True): the gradient shards and the unsharded
    // gradients are freed under fresh_gradients (the latter come back at their
    // first write in backward, backward_into); else kept, to be overwritten.
    for (auto& gr : s.groups) {
        gr.grad_set = false;
        if (fresh_gradients_) gr.grad = {};
    }
    for (auto& slot : s.slots)
        for (auto& g : slot) {
            if (fresh_gradients_)
                Gradient().swap(g);
            else
                std::fill(g.begin(), g.end(), 0.0f);
        }
    if (s.gathers) {
        // A kept all-gathered copy (ZeRO 1/2's partition) is stale until its
        // next all-gather. The default allocator poisons it, so that a missing
        // all-gather fails the tests; torch does not touch it.
        if (!fresh_gradients_)
            for (auto& gr : s.groups)
                if (!gr.transient)
                    for (auto& c : gr.copies) std::fill_n(c.data(), c.size(), std::numeric_limits<float>::quiet_NaN());
    } else {
        for (const auto& gr : s.groups)
            for_each_piece(gr, 0, gr.numel, [&](int p, std::int64_t first, std::int64_t flat, std::int64_t k) {
                std::copy_n(gr.param.begin() + flat, k, params_[static_cast<std::size_t>(p)].begin() + first);
            });
    }
}

std::vector<std::vector<float>> MlpTrainer::full_parameters() const {
    if (!sharding_ || !sharding_->gathers) return params_;
    std::vector<std::vector<float>> out = params_;
    std::vector<int> all(sharding_->groups.size());
    for (std::size_t g = 0; g < all.size(); ++g) all[g] = static_cast<int>(g);
    const auto world = runtime::make_communicator(runtime::CommBackend::mpi, MPI_COMM_WORLD);
    gather_groups(*sharding_, all, *world, out);
    return out;
}

}  // namespace dtsim::executor::cpu
