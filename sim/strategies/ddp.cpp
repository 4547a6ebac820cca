// PyTorch DistributedDataParallel (strategy-semantics.md §1): gradients are
// bucketed by the Reducer, each bucket allreduced as soon as all its gradients
// are ready (launched in bucket order, overlapping the rest of backward), the
// optimizer step after the last allreduce.
#include "dtsim/common/error.hpp"
#include "dtsim/sim/comm_hook.hpp"
#include "dtsim/sim/ddp_buckets.hpp"
#include "dtsim/sim/step_builder.hpp"
#include "dtsim/sim/strategy.hpp"
#include "dtsim/sim/torch_optimizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace dtsim::sim {
namespace {

constexpr std::int64_t MiB = 1024 * 1024;

// Parameter indices in the order their gradients become ready: layers in
// reverse, a layer's parameters last-defined first (bias before weight).
std::vector<int> gradient_arrival_order(const models::Workload& w) {
    std::vector<int> order;
    for (auto layer = w.layers.rbegin(); layer != w.layers.rend(); ++layer)
        for (auto p = layer->params.rbegin(); p != layer->params.rend(); ++p) order.push_back(p->index);
    return order;
}

struct ParamRef {
    std::int64_t numel = 0;
    int layer = -1;
};

std::vector<ParamRef> params_by_index(const models::Workload& w) {
    std::vector<ParamRef> out;
    for (std::size_t l = 0; l < w.layers.size(); ++l)
        for (const auto& p : w.layers[l].params) {
            if (p.index >= static_cast<int>(out.size())) out.resize(static_cast<std::size_t>(p.index) + 1);
            out[static_cast<std::size_t>(p.index)] = {p.numel(), static_cast<int>(l)};
        }
    return out;
}

// Autograd nodes a graph search visits: one per forward op and one
// AccumulateGrad per parameter.
std::int64_t autograd_nodes(const models::Workload& w) {
    std::int64_t n = 0;
    for (const auto& l : w.layers) n += static_cast<std::int64_t>(l.forward.size() + l.params.size());
    return n;
}

// The CPU cost of visiting one autograd node in search_unused_parameters: a
// modelling constant (strategy-semantics.md §1.7 gives the O(nodes) shape, not
// the constant; unverified, about a microsecond per node of C++ traversal).
constexpr std::int64_t kGraphSearchNsPerNode = 1000;

// Reducer buckets for this iteration (§1.2): iteration 1 (and 2 with
// static_graph) has one bucket; later iterations are rebuilt in gradient
// arrival order, unless find_unused_parameters keeps the initial assignment.
std::vector<std::vector<int>> ddp_buckets(const models::Workload& w, const std::vector<ParamRef>& params,
                                          const Config& config, const Knobs& knobs, std::vector<std::string>& notes) {
    const auto cap = static_cast<std::int64_t>(knobs.number("bucket_cap_mb") * MiB);
    // PyTorch >= 2.4 uses the cap for the first bucket too when the user set bucket_cap_mb (§1.1).
    std::int64_t first = knobs.text("first_bucket_mb") != "auto"
                             ? static_cast<std::int64_t>(knobs.number("first_bucket_mb") * MiB)
                         : knobs.is_set("bucket_cap_mb") ? cap
                                                         : MiB;
    const bool find_unused = knobs.boolean("find_unused_parameters");
    const bool static_graph = knobs.boolean("static_graph");
    std::vector<BucketTensor> tensors;
    // Buckets hold gradients in the parameters' dtype: fp32 under autocast,
    // 16-bit under Lightning's "true" precisions.
    const DType grad_dtype = parameter_dtype(config.precision);
    auto tensor = [&](int index) {
        return BucketTensor{index, params[static_cast<std::size_t>(index)].numel * dtype_bytes(grad_dtype), grad_dtype};
    };

    if (find_unused && !static_graph) {
        for (std::size_t i = 0; i < params.size(); ++i) tensors.push_back(tensor(static_cast<int>(i)));
        const std::int64_t limits[] = {first, cap};
        auto b = assign_buckets_by_size(tensors, limits, true);
        std::reverse(b.begin(), b.end());
        notes.push_back(
            "find_unused_parameters=True: buckets are never rebuilt (they keep model.parameters() order, reversed), "
            "each iteration traverses the autograd graph and allreduces the used-parameter map.");
        return b;
    }
    const char* warmup = static_graph ? "Iterations 1 and 2 (static_graph)" : "Iteration 1";
    const std::int64_t unbuilt_iterations = static_graph ? 2 : 1;
    if (config.iteration <= unbuilt_iterations) {
        for (std::size_t i = 0; i < params.size(); ++i) tensors.push_back(tensor(static_cast<int>(i)));
        const std::int64_t limits[] = {std::numeric_limits<std::int64_t>::max()};
        notes.push_back(
            fmt::format("{} before the bucket rebuild: one bucket, allreduced after the whole backward "
                        "(no overlap).",
                        warmup));
        return assign_buckets_by_size(tensors, limits, true);
    }
    for (int index : gradient_arrival_order(w)) tensors.push_back(tensor(index));
    const std::int64_t limits[] = {first, cap};
    notes.push_back(fmt::format(
        "Steady state after the bucket rebuild: buckets follow gradient-arrival order (first bucket {:.3g} MiB, then "
        "{:.3g} MiB). {} runs with one bucket and has no communication/compute overlap.",
        double(first) / MiB, double(cap) / MiB, warmup));
    return assign_buckets_by_size(tensors, limits, false);
}

Plan lower_ddp(const models::Workload& w, const Config& config, const Knobs& knobs) {
    const bool as_view = knobs.boolean("gradient_as_bucket_view");
    const bool find_unused = knobs.boolean("find_unused_parameters") && !knobs.boolean("static_graph");
    const auto& hook = comm_hooks().find(knobs.text("comm_hook"));
    const int micro_steps = config.grad_accum;
    const OptimizerImpl impl = torch_optimizer_impl(knobs);
    // Parameters, gradients and Adam's moments: fp32, as autocast keeps them, or
    // 16-bit under the "true" precisions.
    const std::int64_t element_bytes = dtype_bytes(parameter_dtype(config.precision));
    if (element_bytes != 4 && knobs.text("comm_hook") != "allreduce")
        throw ConfigError(fmt::format(
            "--set comm_hook={} with precision {}: the hooks are modelled over fp32 buckets, and under a \"true\" "
            "precision the gradients already are {}; use comm_hook=allreduce or a mixed precision",
            knobs.text("comm_hook"), to_string(config.precision), to_string(parameter_dtype(config.precision))));

    Plan plan;
    const std::size_t expected_tasks =
        w.layers.size() * 2 * static_cast<std::size_t>(micro_steps) + w.layers.size() + 4;
    plan.tasks.reserve(expected_tasks);
    plan.deps.reserve(expected_tasks * 2);
    plan.memory.reserve(expected_tasks * 3);
    StepBuilder step(plan, w, config);
    const int nccl = step.stream("nccl", TaskKind::collective);
    const int world = step.world_group();
    // torch's Reducer runs at every world size. On one rank, too, backward copies
    // each gradient into its bucket, the bucket is allreduced (over a group of
    // one: priced at nothing) and copied back, and the hook and the
    // unused-parameter search run (issue 15: 19 ms a step for an 8-layer MLP).
    // Only the buffer broadcast and the post-step averaging need peers.
    const bool distributed = config.topology.world_size() > 1;

    const auto params = params_by_index(w);
    const auto buckets = ddp_buckets(w, params, config, knobs, plan.notes);
    // A bucket is ready when the earliest layer holding one of its parameters finishes backward.
    std::vector<int> ready_layer(buckets.size(), std::numeric_limits<int>::max());
    for (std::size_t b = 0; b < buckets.size(); ++b) {
        std::int64_t bytes = 0;
        for (int p : buckets[b]) {
            ready_layer[b] = std::min(ready_layer[b], params[static_cast<std::size_t>(p)].layer);
            bytes += params[static_cast<std::size_t>(p)].numel * element_bytes;
        }
        plan.buckets.push_back({static_cast<int>(b), bytes, buckets[b], {}});
    }
    std::vector<const models::Parameter*> shapes(params.size(), nullptr);
    for (const auto& layer : w.layers)
        for (const auto& p : layer.params) shapes[static_cast<std::size_t>(p.index)] = &p;
    HookContext hook_ctx{step, knobs, nccl, world, micro_steps - 1, shapes, config.iteration};

    const std::int64_t psi = w.param_count();
    plan.resident[static_cast<int>(MemCategory::parameters)] = psi * element_bytes;
    plan.resident[static_cast<int>(MemCategory::optimizer_states)] =
        config.optimizer == OptimizerKind::adam ? psi * 2 * element_bytes : 0;
    // gradient_as_bucket_view: .grad are views into the buckets, which live across steps (§1.5).
    if (as_view)
        plan.resident[static_cast<int>(MemCategory::gradients)] = psi * element_bytes;
    else
        plan.resident[static_cast<int>(MemCategory::buckets)] = psi * element_bytes;
    if (hook.value.resident_bytes)
        plan.resident[static_cast<int>(MemCategory::error_feedback)] =
            hook.value.resident_bytes(hook_ctx, plan.buckets);
    plan.hook.kind = hook.value.kind;
    plan.hook.name = hook.name;
    if (hook.value.describe) hook.value.describe(knobs, plan.hook);

    std::vector<std::int32_t> reduced;
    std::vector<std::int32_t> backward_task(w.layers.size(), -1);
    for (int m = 0; m < micro_steps; ++m) {
        const bool sync = m == micro_steps - 1;  // no_sync on all but the last micro-step (§1.9)
        std::int32_t broadcast = -1;
        // Buffers are broadcast when the previous forward synced: the first micro-step only (§1.8).
        if (m == 0 && distributed && knobs.boolean("broadcast_buffers") && w.buffer_bytes() > 0)
            broadcast = step.collective(CollectiveKind::broadcast, w.buffer_bytes(), world, nccl, {}, m);
        std::int32_t second_last_forward = -1, last_forward = -1;
        for (int l = 0; l < step.layers(); ++l) {
            const std::int32_t deps[] = {l == 0 ? broadcast : -1};
            second_last_forward = last_forward;
            last_forward = step.forward(m, l, deps);
        }
        // find_unused_parameters: prepare_for_backward searches the autograd graph
        // on the CPU at the end of every synced forward (§1.7); backward cannot be
        // issued before it ends. The CPU runs ahead of the GPU, so it starts about
        // when the last forward kernel starts.
        std::int32_t graph_search = -1;
        if (find_unused && sync) {
            const std::int32_t after[] = {second_last_forward};
            graph_search = step.host_task(autograd_nodes(w) * kGraphSearchNsPerNode,
                                          step.stream("cpu", TaskKind::host_compute), after, m);
        }
        std::size_t next_bucket = 0;
        for (int li = step.layers() - 1; li >= 0; --li) {
            const std::int64_t grad_bytes = w.layers[static_cast<std::size_t>(li)].param_count() * element_bytes;
            const std::int32_t search[] = {li == step.layers() - 1 ? graph_search : -1};
            // Copying each gradient into its bucket, divided by the world size, is fused (§1.4).
            backward_task[static_cast<std::size_t>(li)] =
                step.backward(m, li, search, sync ? 2 * grad_bytes : 0);
            if (m == 0 && !as_view) plan.alloc(MemCategory::gradients, grad_bytes);
            // gradient_as_bucket_view after zero_grad(set_to_none=True): autograd
            // still writes each gradient into a fresh tensor, which the Reducer
            // copies into its bucket view and frees (reducer.cpp,
            // mark_variable_ready_dense): transient memory, and fresh pages.
            if (m == 0 && as_view && sync) {
                plan.alloc(MemCategory::gradients, grad_bytes);
                plan.release(MemCategory::gradients, grad_bytes);
            }
            if (!sync) continue;
            // Launch, in index order, every bucket whose gradients are now all ready (§1.3).
            while (next_bucket < buckets.size() && ready_layer[next_bucket] >= li) {
                const auto ready = backward_task[static_cast<std::size_t>(ready_layer[next_bucket])];
                reduced.push_back(hook.value.reduce(hook_ctx, plan.buckets[next_bucket], ready));
                ++next_bucket;
            }
        }
        DTSIM_ASSERT(!sync || next_bucket == buckets.size(), "every bucket is reduced");
    }
    const int last = micro_steps - 1;
    if (find_unused)
        // The used-parameter map: one int32 per parameter tensor (§1.7).
        reduced.push_back(step.collective(CollectiveKind::allreduce, static_cast<std::int64_t>(params.size()) * 4,
                                          world, nccl, {}, last));
    // finalize_backward waits for every bucket, then copies buckets back into .grad
    // unless the gradients already are bucket views (§1.3, §1.5).
    std::vector<std::int32_t> step_deps = reduced;
    if (!as_view) step_deps = {step.pass(Phase::gradient_copy, 2 * psi * element_bytes, 0, reduced, last)};
    std::int64_t largest = 0;
    for (const auto& p : params) largest = std::max(largest, p.numel);
    std::int32_t done = step.optimizer_step({.elements = psi,
                                             .tensors = static_cast<std::int64_t>(params.size()),
                                             .largest = largest,
                                             .impl = impl,
                                             .element_bytes = element_bytes},
                                            step_deps, last);
    // zero_grad(set_to_none=True) frees the gradients after the step.
    if (!as_view) plan.release(MemCategory::gradients, psi * element_bytes);
    if (distributed && hook.value.after_step) done = hook.value.after_step(hook_ctx, done);
    return plan;
}

std::vector<StepPhase> ddp_phases(const Config& config, const Knobs& knobs) {
    std::vector<StepPhase> phases;
    if (config.topology.world_size() == 1) return phases;
    const auto& hook = comm_hooks().find(knobs.text("comm_hook"));
    if (hook.value.phases) phases = hook.value.phases(config, knobs);
    if (phases.empty()) phases.push_back({"steady state", Config::kSteadyIteration, 1.0});
    // Before the bucket rebuild (§1.2, §1.6); never rebuilt with find_unused_parameters.
    const bool static_graph = knobs.boolean("static_graph");
    if (!knobs.boolean("find_unused_parameters") || static_graph)
        phases.push_back({static_graph ? "iterations 1-2, before the bucket rebuild (static_graph)"
                                       : "iteration 1, before the bucket rebuild",
                          1, 0.0});
    return phases;
}

}  // namespace

void register_ddp(Registry<Strategy>& r) {
    Strategy s;
    s.lower = lower_ddp;
    s.phases = ddp_phases;
    s.knobs = {
        {"bucket_cap_mb", KnobType::number, "25", "Reducer bucket size cap in MiB (torch default 25)", {}, 0, true},
        {"first_bucket_mb",
         KnobType::number,
         "auto",
         "first bucket's cap in MiB: auto = 1 (dist._DEFAULT_FIRST_BUCKET_BYTES), or bucket_cap_mb when that is set "
         "(PyTorch >= 2.4)",
         {},
         0,
         true},
        {"gradient_as_bucket_view",
         KnobType::boolean,
         "false",
         ".grad tensors are views into the buckets: saves one gradient copy of memory and the bucket copies",
         {},
         0},
        {"static_graph",
         KnobType::boolean,
         "false",
         "the graph does not change: buckets rebuilt after iteration 2",
         {},
         0},
        {"find_unused_parameters",
         KnobType::boolean,
         "false",
         "traverse the autograd graph every iteration; buckets are never rebuilt",
         {},
         0},
        {"broadcast_buffers", KnobType::boolean, "true", "broadcast module buffers from rank 0 before forward", {}, 0},
        {"comm_hook", KnobType::choice, "allreduce", "communication hook (register_comm_hook)", comm_hooks().names(),
         0},
    };
    for (auto& k : torch_optimizer_knobs()) s.knobs.push_back(std::move(k));
    // Each hook's own knobs, accepted only together with that hook.
    for (const auto& h : comm_hooks().entries())
        for (auto k : h.value.knobs) {
            // A knob several hooks share (PowerSGD's and batched PowerSGD's) is declared once.
            auto same =
                std::find_if(s.knobs.begin(), s.knobs.end(), [&](const KnobSpec& x) { return x.name == k.name; });
            if (same != s.knobs.end()) {
                same->applies_when += "|" + h.name;
                continue;
            }
            k.description = fmt::format("[{}] {}", h.name, k.description);
            k.applies_when = "comm_hook=" + h.name;
            s.knobs.push_back(std::move(k));
        }
    r.add("ddp", "PyTorch DistributedDataParallel: bucketed gradient allreduce overlapped with backward", s);
}

}  // namespace dtsim::sim
