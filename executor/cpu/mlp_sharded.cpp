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
// The optimizer steps the shards only; afterwards the full parameters are
// poisoned (NaN) until an all-gather refreshes them, so a missing or misrouted
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

std::int64_t total_bytes(const Sharding& s, const std::vector<int>& groups) {
    std::int64_t b = 0;
    for (int g : groups) {
        const auto& gr = s.groups[static_cast<std::size_t>(g)];
        b += 4 * gr.shard * gr.n;
    }
    return b;
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
            t.phase != Phase::gradient_copy && t.phase != Phase::compression)
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
        gr.param.assign(shard, 0.0f);
        gr.grad.assign(shard, 0.0f);
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
    sharding_ = std::move(s);
}

namespace {
volatile float g_flatten_sink = 0;  // keeps the copies
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

bool MlpTrainer::run_sharded(int task, runtime::Communicator* comm) {
    if (!sharding_) return false;
    Sharding& s = *sharding_;
    DTSIM_ASSERT(task >= 0 && task < static_cast<int>(s.actions.size()), "the task is the plan's");
    const sim::Task& t = s.tasks[task];
    const Sharding::Action& a = s.actions[static_cast<std::size_t>(task)];
    const auto m = static_cast<std::size_t>(t.micro_step);
    // The gradient a reduction at micro-step m sends: that micro-step's, or the
    // sum of all so far when only the last micro-step reduces (no_sync, stage 1).
    const std::size_t from = s.every_micro_step ? m : 0;
    auto grad_at = [&](int p, std::int64_t e) {
        float g = 0;
        for (std::size_t j = from; j <= m; ++j)
            g += s.slots[j][static_cast<std::size_t>(p)][static_cast<std::size_t>(e)];
        return g;
    };
    const float inv = 1.0f / static_cast<float>(world_);
    switch (a.op) {
        case Sharding::Op::replay: return false;
        case Sharding::Op::nothing: return true;
        case Sharding::Op::flatten: flatten(t.bytes / 2); return true;
        case Sharding::Op::divide: divide_in_place(static_cast<std::int64_t>(t.flops)); return true;
        case Sharding::Op::forward: forward(t.micro_step, t.layer); return true;
        case Sharding::Op::backward: backward_into(t.micro_step, t.layer, s.slots[m]); return true;
        case Sharding::Op::optimizer: sharded_step(t.optimizer_impl); return true;
        case Sharding::Op::gather: gather_groups(s, a.groups, *comm, params_); return true;
        case Sharding::Op::reduce_scatter: {
            const int n = s.groups[static_cast<std::size_t>(a.groups.front())].n;
            DTSIM_ASSERT(comm->size() == n, "the reduce-scatter's group is the shard group");
            std::int64_t count = 0;
            for (int g : a.groups) count += s.groups[static_cast<std::size_t>(g)].shard;
            std::vector<float> send(static_cast<std::size_t>(count * n), 0.0f), recv(static_cast<std::size_t>(count));
            std::size_t at = 0;
            for (int r = 0; r < n; ++r)
                for (int g : a.groups) {
                    const auto& gr = s.groups[static_cast<std::size_t>(g)];
                    for_each_piece(
                        gr, r * gr.shard, gr.shard, [&](int p, std::int64_t first, std::int64_t flat, std::int64_t k) {
                            for (std::int64_t e = 0; e < k; ++e)
                                send[at + static_cast<std::size_t>(flat - r * gr.shard + e)] = grad_at(p, first + e);
                        });
                    at += static_cast<std::size_t>(gr.shard);
                }
            comm->reduce_scatter_sum(send.data(), recv.data(), count);
            at = 0;
            for (int g : a.groups) {
                auto& gr = s.groups[static_cast<std::size_t>(g)];
                for (std::size_t e = 0; e < gr.grad.size(); ++e) gr.grad[e] += recv[at + e] * inv;
                at += gr.grad.size();
            }
            return true;
        }
        case Sharding::Op::allreduce: {
            std::vector<float> flat;
            for (int p : a.params)
                for (std::int64_t e = 0; e < static_cast<std::int64_t>(params_[static_cast<std::size_t>(p)].size());
                     ++e)
                    flat.push_back(grad_at(p, e));
            comm->allreduce_sum(flat.data(), static_cast<std::int64_t>(flat.size()));
            std::size_t at = 0;
            for (int p : a.params) {
                const auto& l = s.loc[static_cast<std::size_t>(p)];
                auto& gr = s.groups[static_cast<std::size_t>(l.group)];
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

void MlpTrainer::sharded_step(sim::OptimizerImpl impl) {
    Sharding& s = *sharding_;
    if (!s.reductions)  // one rank: nothing reduced, every gradient is this rank's
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
        for (auto& gr : s.groups) tensors.push_back({gr.param, gr.grad, gr.m, gr.v});
        adam_step(tensors, ++adam_t_, lr_, impl);
    }
    for (auto& gr : s.groups) std::fill(gr.grad.begin(), gr.grad.end(), 0.0f);
    // zero_grad(set_to_none=True): the unsharded gradients are freed, and come
    // back at their first write in backward (backward_into), under
    // fresh_gradients; else kept and zeroed. The shards stay.
    for (auto& slot : s.slots)
        for (auto& g : slot) {
            if (fresh_gradients_)
                std::vector<float>().swap(g);
            else
                std::fill(g.begin(), g.end(), 0.0f);
        }
    if (s.gathers) {
        // Stale until all-gathered again. torch frees them as it reshards and
        // touches them no more; so does the torch allocator's run here. The
        // default one poisons them, so that a missing all-gather fails the tests.
        if (!fresh_gradients_)
            for (auto& p : params_) std::fill(p.begin(), p.end(), std::numeric_limits<float>::quiet_NaN());
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
