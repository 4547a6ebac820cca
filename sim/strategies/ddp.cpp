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
#include <optional>

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

// The knobs, parsed once.
struct DdpOptions {
    bool as_view = false;      // gradient_as_bucket_view
    bool find_unused = false;  // find_unused_parameters, unless static_graph (§1.7)
    bool static_graph = false;
    bool broadcast_buffers = true;
    std::int64_t cap = 0;    // bucket_cap_mb, in bytes
    std::int64_t first = 0;  // the first bucket's cap, in bytes
    std::string hook;        // comm_hook
    OptimizerImpl optimizer_impl{};
    // Parameters, gradients and Adam's moments: fp32, as autocast keeps them, or
    // 16-bit under the "true" precisions.
    DType grad_dtype = DType::fp32;
    std::int64_t element_bytes = 4;
};

DdpOptions parse_options(const Config& config, const Knobs& knobs) {
    DdpOptions o;
    o.as_view = knobs.boolean("gradient_as_bucket_view");
    o.static_graph = knobs.boolean("static_graph");
    o.find_unused = knobs.boolean("find_unused_parameters") && !o.static_graph;
    o.broadcast_buffers = knobs.boolean("broadcast_buffers");
    o.cap = static_cast<std::int64_t>(knobs.number("bucket_cap_mb") * MiB);
    // PyTorch >= 2.4 uses the cap for the first bucket too when the user set bucket_cap_mb (§1.1); torch
    // 2.15's rebuilt buckets confirm it (tests/python/ddp_buckets.py).
    o.first = knobs.text("first_bucket_mb") != "auto" ? static_cast<std::int64_t>(knobs.number("first_bucket_mb") * MiB)
              : knobs.is_set("bucket_cap_mb")         ? o.cap
                                                      : MiB;
    o.hook = knobs.text("comm_hook");
    o.optimizer_impl = torch_optimizer_impl(knobs);
    o.grad_dtype = parameter_dtype(config.precision);
    o.element_bytes = dtype_bytes(o.grad_dtype);
    if (o.element_bytes != 4 && o.hook != "allreduce")
        throw ConfigError(fmt::format(
            "--set comm_hook={} with precision {}: the hooks are modelled over fp32 buckets, and under a \"true\" "
            "precision the gradients already are {}; use comm_hook=allreduce or a mixed precision",
            o.hook, to_string(config.precision), to_string(o.grad_dtype)));
    return o;
}

// Reducer buckets for this iteration (§1.2): iteration 1 (and 2 with
// static_graph) has one bucket; later iterations are rebuilt in gradient
// arrival order, unless find_unused_parameters keeps the initial assignment.
std::vector<std::vector<int>> ddp_buckets(const models::Workload& w, const std::vector<ParamRef>& params,
                                          const Config& config, const DdpOptions& o, std::vector<std::string>& notes) {
    std::vector<BucketTensor> tensors;
    // Buckets hold gradients in the parameters' dtype: fp32 under autocast,
    // 16-bit under Lightning's "true" precisions.
    auto tensor = [&](int index) {
        return BucketTensor{index, params[static_cast<std::size_t>(index)].numel * o.element_bytes, o.grad_dtype};
    };

    if (o.find_unused) {
        for (std::size_t i = 0; i < params.size(); ++i) tensors.push_back(tensor(static_cast<int>(i)));
        const std::int64_t limits[] = {o.first, o.cap};
        auto b = assign_buckets_by_size(tensors, limits, true);
        std::reverse(b.begin(), b.end());
        notes.push_back(
            "find_unused_parameters=True: buckets are never rebuilt (they keep model.parameters() order, reversed), "
            "each iteration traverses the autograd graph and allreduces the used-parameter map.");
        return b;
    }
    const char* warmup = o.static_graph ? "Iterations 1 and 2 (static_graph)" : "Iteration 1";
    const std::int64_t unbuilt_iterations = o.static_graph ? 2 : 1;
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
    const std::int64_t limits[] = {o.first, o.cap};
    notes.push_back(fmt::format(
        "Steady state after the bucket rebuild: buckets follow gradient-arrival order (first bucket {:.3g} MiB, then "
        "{:.3g} MiB). {} runs with one bucket and has no communication/compute overlap.",
        double(o.first) / MiB, double(o.cap) / MiB, warmup));
    return assign_buckets_by_size(tensors, limits, false);
}

// One DDP step as torch's Reducer runs it: the constructor builds the buckets,
// the stream, the model states and the hook; forward(m) and backward(m) run
// micro-step m (the buckets launched as their gradients become ready);
// optimizer_step() ends the step.
class DdpLowering {
public:
    DdpLowering(const models::Workload& w, const Config& config, const DdpOptions& o, const Knobs& knobs, Plan& plan)
        : w_(w),
          config_(config),
          o_(o),
          plan_(plan),
          hook_(comm_hooks().find(o.hook)),
          params_(params_by_index(w)),
          // torch's Reducer runs at every world size. On one rank, too, backward copies
          // each gradient into its bucket, the bucket is allreduced (over a group of
          // one: priced at nothing) and copied back, and the hook and the
          // unused-parameter search run (issue 15: 19 ms a step for an 8-layer MLP).
          // Only the buffer broadcast and the post-step averaging need peers.
          distributed_(config.topology.world_size() > 1) {
        const std::size_t expected_tasks =
            w_.layers.size() * 2 * static_cast<std::size_t>(config_.grad_accum) + w_.layers.size() + 4;
        plan_.tasks.reserve(expected_tasks);
        plan_.deps.reserve(expected_tasks * 2);
        plan_.memory.reserve(expected_tasks * 3);
        step_.emplace(plan_, w_, config_);
        nccl_ = step().stream("nccl", TaskKind::collective);
        world_ = step().world_group();
        build_buckets();
        shapes_.assign(params_.size(), nullptr);
        for (const auto& layer : w_.layers)
            for (const auto& p : layer.params) shapes_[static_cast<std::size_t>(p.index)] = &p;
        hook_ctx_.emplace(
            HookContext{step(), knobs, nccl_, world_, config_.grad_accum - 1, shapes_, config_.iteration});
        place_model_states(knobs);
        backward_task_.assign(w_.layers.size(), -1);
    }

    // ---- forward (§1.7, §1.8)
    void forward(int m) {
        const bool sync = m == config_.grad_accum - 1;  // no_sync on all but the last micro-step (§1.9)
        std::int32_t broadcast = -1;
        // Buffers are broadcast when the previous forward synced: the first micro-step only (§1.8).
        if (m == 0 && distributed_ && o_.broadcast_buffers && w_.buffer_bytes() > 0)
            broadcast = step().collective(CollectiveKind::broadcast, w_.buffer_bytes(), world_, nccl_, {}, m);
        std::int32_t second_last_forward = -1, last_forward = -1;
        for (int l = 0; l < step().layers(); ++l) {
            const std::int32_t deps[] = {l == 0 ? broadcast : -1};
            second_last_forward = last_forward;
            last_forward = step().forward(m, l, deps);
        }
        // find_unused_parameters: prepare_for_backward searches the autograd graph
        // on the CPU at the end of every synced forward (§1.7); backward cannot be
        // issued before it ends. The CPU runs ahead of the GPU, so it starts about
        // when the last forward kernel starts.
        graph_search_ = -1;
        if (o_.find_unused && sync) {
            const std::int32_t after[] = {second_last_forward};
            graph_search_ = step().host_task(autograd_nodes(w_) * kGraphSearchNsPerNode,
                                             step().stream("cpu", TaskKind::host_compute), after, m);
        }
    }

    // ---- backward and the bucket reductions (§1.3, §1.4, §1.5)
    void backward(int m) {
        const bool sync = m == config_.grad_accum - 1;
        std::size_t next_bucket = 0;
        for (int li = step().layers() - 1; li >= 0; --li) {
            const std::int64_t grad_bytes = w_.layers[static_cast<std::size_t>(li)].param_count() * o_.element_bytes;
            const std::int32_t search[] = {li == step().layers() - 1 ? graph_search_ : -1};
            // Copying each gradient into its bucket, divided by the world size, is fused (§1.4).
            backward_task_[static_cast<std::size_t>(li)] = step().backward(m, li, search, sync ? 2 * grad_bytes : 0);
            if (m == 0 && !o_.as_view) plan_.alloc(MemCategory::gradients, grad_bytes);
            // gradient_as_bucket_view after zero_grad(set_to_none=True): autograd
            // still writes each gradient into a fresh tensor, which the Reducer
            // copies into its bucket view and frees (reducer.cpp,
            // mark_variable_ready_dense): transient memory, and fresh pages.
            if (m == 0 && o_.as_view && sync) {
                plan_.alloc(MemCategory::gradients, grad_bytes);
                plan_.release(MemCategory::gradients, grad_bytes);
            }
            if (!sync) continue;
            // Launch, in index order, every bucket whose gradients are now all ready (§1.3).
            while (next_bucket < buckets_.size() && ready_layer_[next_bucket] >= li) {
                const auto ready = backward_task_[static_cast<std::size_t>(ready_layer_[next_bucket])];
                reduced_.push_back(hook_.value.reduce(*hook_ctx_, plan_.buckets[next_bucket], ready));
                ++next_bucket;
            }
        }
        DTSIM_ASSERT(!sync || next_bucket == buckets_.size(), "every bucket is reduced");
    }

    // ---- step: finalize_backward, the optimizer, zero_grad, the hook's post-step work
    void optimizer_step() {
        const int last = config_.grad_accum - 1;
        const std::int64_t psi = w_.param_count();
        if (o_.find_unused)
            // The used-parameter map: one int32 per parameter tensor (§1.7).
            reduced_.push_back(step().collective(
                CollectiveKind::allreduce, static_cast<std::int64_t>(params_.size()) * 4, world_, nccl_, {}, last));
        // finalize_backward waits for every bucket, then copies buckets back into .grad
        // unless the gradients already are bucket views (§1.3, §1.5).
        std::vector<std::int32_t> step_deps = reduced_;
        if (!o_.as_view) step_deps = {step().pass(Phase::gradient_copy, 2 * psi * o_.element_bytes, 0, reduced_, last)};
        std::int64_t largest = 0;
        for (const auto& p : params_) largest = std::max(largest, p.numel);
        std::int32_t done = step().optimizer_step({.elements = psi,
                                                   .tensors = static_cast<std::int64_t>(params_.size()),
                                                   .largest = largest,
                                                   .impl = o_.optimizer_impl,
                                                   .element_bytes = o_.element_bytes},
                                                  step_deps, last);
        // zero_grad(set_to_none=True) frees the gradients after the step.
        if (!o_.as_view) plan_.release(MemCategory::gradients, psi * o_.element_bytes);
        if (distributed_ && hook_.value.after_step) done = hook_.value.after_step(*hook_ctx_, done);
    }

private:
    StepBuilder& step() { return *step_; }

    // The Reducer's buckets; each is ready when the earliest layer holding one of
    // its parameters finishes backward. Their notes go in the report.
    void build_buckets() {
        buckets_ = ddp_buckets(w_, params_, config_, o_, plan_.notes);
        ready_layer_.assign(buckets_.size(), std::numeric_limits<int>::max());
        for (std::size_t b = 0; b < buckets_.size(); ++b) {
            std::int64_t bytes = 0;
            for (int p : buckets_[b]) {
                ready_layer_[b] = std::min(ready_layer_[b], params_[static_cast<std::size_t>(p)].layer);
                bytes += params_[static_cast<std::size_t>(p)].numel * o_.element_bytes;
            }
            plan_.buckets.push_back({static_cast<int>(b), bytes, buckets_[b], {}});
        }
    }

    // Parameters, Adam's moments, and the buckets or the gradients that are their views (§1.5).
    void place_model_states(const Knobs& knobs) {
        const std::int64_t psi = w_.param_count();
        plan_.resident[static_cast<int>(MemCategory::parameters)] = psi * o_.element_bytes;
        plan_.resident[static_cast<int>(MemCategory::optimizer_states)] =
            config_.optimizer == OptimizerKind::adam ? psi * 2 * o_.element_bytes : 0;
        // gradient_as_bucket_view: .grad are views into the buckets, which live across steps (§1.5).
        if (o_.as_view)
            plan_.resident[static_cast<int>(MemCategory::gradients)] = psi * o_.element_bytes;
        else
            plan_.resident[static_cast<int>(MemCategory::buckets)] = psi * o_.element_bytes;
        if (hook_.value.resident_bytes)
            plan_.resident[static_cast<int>(MemCategory::error_feedback)] =
                hook_.value.resident_bytes(*hook_ctx_, plan_.buckets);
        plan_.hook.kind = hook_.value.kind;
        plan_.hook.name = hook_.name;
        if (hook_.value.describe) hook_.value.describe(knobs, plan_.hook);
    }

    const models::Workload& w_;
    const Config& config_;
    const DdpOptions& o_;
    Plan& plan_;
    const Registry<CommHook>::Entry& hook_;
    const std::vector<ParamRef> params_;
    const bool distributed_;
    std::optional<StepBuilder> step_;
    int nccl_ = -1, world_ = -1;
    std::vector<std::vector<int>> buckets_;
    std::vector<int> ready_layer_;
    std::vector<const models::Parameter*> shapes_;
    std::optional<HookContext> hook_ctx_;
    // Where the step stands.
    std::int32_t graph_search_ = -1;
    std::vector<std::int32_t> backward_task_;
    std::vector<std::int32_t> reduced_;
};

Plan lower_ddp(const models::Workload& w, const Config& config, const Knobs& knobs) {
    const DdpOptions options = parse_options(config, knobs);
    Plan plan;
    DdpLowering ddp(w, config, options, knobs, plan);
    for (int m = 0; m < config.grad_accum; ++m) {
        ddp.forward(m);
        ddp.backward(m);
    }
    ddp.optimizer_step();
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
        {.name = "bucket_cap_mb",
         .type = KnobType::number,
         .default_value = "25",
         .description = "Reducer bucket size cap in MiB (torch default 25)",
         .min_exclusive = true},
        {.name = "first_bucket_mb",
         .type = KnobType::number,
         .default_value = "auto",
         .description = "first bucket's cap in MiB: auto = 1 (dist._DEFAULT_FIRST_BUCKET_BYTES), or bucket_cap_mb when "
                        "that is set "
                        "(PyTorch >= 2.4)",
         .min_exclusive = true},
        {.name = "gradient_as_bucket_view",
         .type = KnobType::boolean,
         .default_value = "false",
         .description =
             ".grad tensors are views into the buckets: saves one gradient copy of memory and the bucket copies"},
        {.name = "static_graph",
         .type = KnobType::boolean,
         .default_value = "false",
         .description = "the graph does not change: buckets rebuilt after iteration 2"},
        {.name = "find_unused_parameters",
         .type = KnobType::boolean,
         .default_value = "false",
         .description = "traverse the autograd graph every iteration; buckets are never rebuilt"},
        {.name = "broadcast_buffers",
         .type = KnobType::boolean,
         .default_value = "true",
         .description = "broadcast module buffers from rank 0 before forward"},
        {.name = "comm_hook",
         .type = KnobType::choice,
         .default_value = "allreduce",
         .description = "communication hook (register_comm_hook)",
         .choices = comm_hooks().names()},
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
