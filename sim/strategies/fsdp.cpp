// PyTorch FullyShardedDataParallel, "FSDP1" (strategy-semantics.md §3), with
// the constructor defaults of PyTorch >= 2.1 (§3.1). Each wrapped unit's
// parameters form one flat parameter, sharded over the shard group (§3.2):
// unshard = one all-gather in param_dtype before the unit runs, gradient
// reduction = one reduce-scatter in reduce_dtype after its backward (plus, for
// the hybrid strategies, an all-reduce of the shard across nodes). FSDP issues
// the all-gathers from its unshard stream and the reduce-scatters from its
// post-backward stream, but both go to the shard group's process group, and
// ProcessGroupNCCL runs a group's collectives on that group's one NCCL stream,
// in issue order: so they share one stream here ("shard group"), serialized,
// overlapping compute; the hybrid inter-node and NO_SHARD all-reduces, on
// another group, have theirs ("all-reduce") and share the link with them. The CPU issue points of the hooks
// (pre-forward, pre-backward, post-backward) are modelled as dependencies on compute tasks.
//
// Gradient accumulation (§3.3, §6): with no_sync (the default) micro-steps
// 0..K-2 run inside model.no_sync(), holding each unit's unsharded gradient
// until the last micro-step's reduction; with no_sync=false every micro-step
// reduces and the sharded gradient accumulates (_saved_grad_shard).
#include "dtsim/common/error.hpp"
#include "dtsim/sim/fsdp_wrap.hpp"
#include "dtsim/sim/step_builder.hpp"
#include "dtsim/sim/strategy.hpp"
#include "dtsim/sim/torch_optimizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <optional>
#include <utility>

namespace dtsim::sim {
namespace {

enum class Sharding { full_shard, shard_grad_op, no_shard, hybrid_shard, hybrid_shard_zero2 };
enum class Prefetch { backward_pre, backward_post, none };

Sharding sharding_from(const std::string& s) {
    if (s == "FULL_SHARD") return Sharding::full_shard;
    if (s == "SHARD_GRAD_OP") return Sharding::shard_grad_op;
    if (s == "NO_SHARD") return Sharding::no_shard;
    if (s == "HYBRID_SHARD") return Sharding::hybrid_shard;
    DTSIM_ASSERT(s == "_HYBRID_SHARD_ZERO2", "unknown sharding_strategy " + s);
    return Sharding::hybrid_shard_zero2;
}

Prefetch prefetch_from(const std::string& s) {
    if (s == "BACKWARD_PRE") return Prefetch::backward_pre;
    if (s == "BACKWARD_POST") return Prefetch::backward_post;
    DTSIM_ASSERT(s == "NONE", "unknown backward_prefetch " + s);
    return Prefetch::none;
}

// One FSDP unit: a wrapped module and its flat parameter (§3.2).
struct Unit {
    std::int64_t numel = 0;   // parameters of the unit
    std::int64_t padded = 0;  // flat parameter padded to a multiple of the shard group size N
    std::int64_t shard = 0;   // elements each rank keeps: padded / N = ceil(numel / N)
    int first_layer = -1;     // lowest layer index (the post-backward hook fires after its backward)
    int last_layer = -1;      // highest layer index (the pre-backward hook fires before its backward)
};

constexpr int kRoot = kFsdpRootUnit;

// A policy's module classes (activation_checkpointing_policy, or
// transformer_auto_wrap_policy's transformer_layer_cls) against the model's:
// dtsim wraps and checkpoints whole blocks, so the policy names the block
// class, and only it.
void check_block_classes(const models::Workload& w, const Knobs& knobs, const std::string& knob) {
    const std::string& given = knobs.text(knob);
    if (!knobs.is_set(knob) || given == "none" || given == "auto") return;
    if (w.block_class.empty())
        throw ConfigError(
            fmt::format("--set {}={}: {} has no blocks for a policy to name (dtsim checkpoints and wraps "
                        "transformer blocks and ResNet bottlenecks)",
                        knob, given, w.model));
    std::size_t begin = 0;
    bool named = false;
    while (begin <= given.size()) {
        const std::size_t comma = std::min(given.find(',', begin), given.size());
        const std::string cls = given.substr(begin, comma - begin);
        if (cls != w.block_name())
            throw ConfigError(
                fmt::format("--set {}={}: expected {}'s block class {} (dtsim models the policy on whole "
                            "blocks; {} is not one)",
                            knob, given, w.model, w.block_name(), cls));
        named = true;
        begin = comma + 1;
    }
    DTSIM_ASSERT(named, "an empty class list passed the knob's validation");
}

// The units and their sizes, from the wrap policy (sim/fsdp_wrap.hpp).
std::vector<Unit> wrap_units(const models::Workload& w, std::vector<int> layer_units, std::vector<int>& unit_of) {
    unit_of = std::move(layer_units);
    const std::size_t n = w.layers.size();
    std::vector<Unit> units(static_cast<std::size_t>(*std::max_element(unit_of.begin(), unit_of.end())) + 1);
    for (std::size_t l = 0; l < n; ++l) {
        Unit& u = units[static_cast<std::size_t>(unit_of[l])];
        u.numel += w.layers[l].param_count();
        if (u.first_layer < 0) u.first_layer = static_cast<int>(l);
        u.last_layer = static_cast<int>(l);
    }
    return units;
}

DType resolve_dtype(const std::string& value, DType automatic) {
    return value == "auto" ? automatic : dtype_from_string(value);
}

// The knobs, parsed once.
struct FsdpOptions {
    // torch's fully_shard ("FSDP2", strategy fsdp2) rather than
    // FullyShardedDataParallel: per-parameter shards, all-gathers copied out
    // into the unsharded parameters, reduce-scatter inputs copied in
    // (docs/notes/fsdp2.md).
    bool fully_shard = false;
    bool reshard_root = false;  // fully_shard(model, reshard_after_forward=True) given explicitly
    std::string sharding_name;  // as given: the notes quote it
    Sharding sharding = Sharding::full_shard;
    Prefetch prefetch = Prefetch::backward_pre;
    bool forward_prefetch = false;
    bool limit_all_gathers = true;
    bool offload = false;
    bool no_sync = true;
    std::string wrap_policy;
    bool lightning = false;          // Lightning's FSDPStrategy built it (the notes say which)
    bool checkpoint_policy = false;  // activation_checkpointing_policy named the block class
    OptimizerImpl optimizer_impl{};
    // MixedPrecision (§3.7): all-gathers in param_dtype, reductions in reduce_dtype
    // (which follows param_dtype when not given).
    DType param_dtype = DType::fp32;
    DType reduce_dtype = DType::fp32;
    std::int64_t param_bytes = 4;
    std::int64_t reduce_bytes = 4;
    // The flat parameter's own dtype, which its shard, gradient shard and Adam's
    // moments keep: fp32, or 16-bit when Lightning's "true" precision converted
    // the model before wrapping it.
    std::int64_t shard_bytes = 4;
};

// The optimizer's implementation and the mixed precision, which both FSDPs
// take by the same knob names (MixedPrecision / MixedPrecisionPolicy).
void parse_precision(FsdpOptions& o, const Config& config, const Knobs& knobs) {
    o.optimizer_impl = torch_optimizer_impl(knobs);
    o.param_dtype = resolve_dtype(knobs.text("param_dtype"), compute_dtype(config.precision));
    o.reduce_dtype = resolve_dtype(knobs.text("reduce_dtype"), o.param_dtype);
    o.param_bytes = dtype_bytes(o.param_dtype);
    o.reduce_bytes = dtype_bytes(o.reduce_dtype);
    o.shard_bytes = dtype_bytes(parameter_dtype(config.precision));
}

FsdpOptions parse_options(const models::Workload& w, const Config& config, const Knobs& knobs) {
    check_block_classes(w, knobs, "activation_checkpointing_policy");
    check_block_classes(w, knobs, "transformer_layer_cls");
    FsdpOptions o;
    o.wrap_policy = fsdp_wrap_policy(knobs);
    if (knobs.is_set("min_num_params") && o.wrap_policy != "size")
        throw ConfigError("--set min_num_params applies to auto_wrap_policy=size; add --set auto_wrap_policy=size");
    o.sharding_name = knobs.text("sharding_strategy");
    o.sharding = sharding_from(o.sharding_name);
    o.prefetch = prefetch_from(knobs.text("backward_prefetch"));
    o.forward_prefetch = knobs.boolean("forward_prefetch");
    o.limit_all_gathers = knobs.boolean("limit_all_gathers");
    o.offload = knobs.boolean("cpu_offload");
    o.no_sync = knobs.boolean("no_sync");
    o.lightning = knobs.text("frontend") == "lightning";
    o.checkpoint_policy =
        knobs.is_set("activation_checkpointing_policy") && knobs.text("activation_checkpointing_policy") != "none";
    parse_precision(o, config, knobs);
    return o;
}

// fully_shard's knobs (strategy fsdp2) in FSDP1's terms: reshard_after_forward
// is FULL_SHARD's free after forward (false: SHARD_GRAD_OP's keep), and a 2-D
// mesh (hsdp) shards inside each node and replicates across nodes, as
// HYBRID_SHARD. Backward prefetches one group, as BACKWARD_PRE; forward
// prefetches implicitly, bounded by the copy-out events rather than the rate
// limiter (FsdpLowering::copy_out_bound).
FsdpOptions parse_fully_shard_options(const Config& config, const Knobs& knobs) {
    FsdpOptions o;
    o.fully_shard = true;
    const std::string& given = knobs.text("reshard_after_forward");
    const bool reshard = given != "false", hsdp = knobs.boolean("hsdp");
    o.reshard_root = given == "true";
    o.sharding = hsdp ? (reshard ? Sharding::hybrid_shard : Sharding::hybrid_shard_zero2)
                      : (reshard ? Sharding::full_shard : Sharding::shard_grad_op);
    o.prefetch = Prefetch::backward_pre;
    o.limit_all_gathers = false;
    o.no_sync = !knobs.boolean("requires_gradient_sync");
    o.wrap_policy = knobs.text("units");
    parse_precision(o, config, knobs);
    return o;
}

// One FSDP step as PyTorch runs it: the constructor lays out the groups,
// units, streams and model states; forward(m) and backward(m) run micro-step
// m with their hooks; optimizer_step() and explain() end the step.
class FsdpLowering {
public:
    // `units` and `unit_of`: the wrap policy's units (wrap_units).
    FsdpLowering(const models::Workload& w, const Config& config, const FsdpOptions& o, Plan& plan,
                 std::vector<Unit> units, std::vector<int> unit_of)
        : w_(w), config_(config), o_(o), plan_(plan), unit_of_(std::move(unit_of)), units_(std::move(units)) {
        shard_group_topology();
        build_units();
        const std::size_t layer_count = w_.layers.size();
        const std::size_t expected_tasks =
            static_cast<std::size_t>(config_.grad_accum) * (2 * layer_count + 7 * units_.size()) + layer_count +
            units_.size() + 4;
        plan_.tasks.reserve(expected_tasks);
        plan_.deps.reserve(expected_tasks * 2);
        plan_.memory.reserve(expected_tasks * 3);
        step_.emplace(plan_, w_, config_);
        open_streams();
        place_model_states();
        // Backward order of the pre-backward hooks: by each unit's highest layer.
        for (int l = static_cast<int>(layer_count) - 1; l >= 0; --l) {
            const int u = unit_of_[static_cast<std::size_t>(l)];
            if (unit(u).last_layer == l) backward_order_.push_back(u);
        }
        gather_.assign(units_.size(), -1);
    }

    // ---- forward (§3.3, §3.4)
    void forward(int m) {
        in_backward_ = false;
        start_pass();
        order_.clear();  // units to all-gather, in pre-forward order: the root (it wraps the model) first
        for (int u = 0; u < static_cast<int>(units_.size()); ++u)
            if (needs_gather(u)) order_.push_back(u);
        next_ = 0;
        // On a CPU backend the model's thread issues this micro-step's first
        // all-gathers once the micro-step before it has returned from backward.
        const std::int32_t after_previous = config_.collectives_block_compute ? previous_micro_step_ : -1;
        // The root's pre-forward unshards it; forward_prefetch also prefetches the next unit.
        if (next_ < order_.size() && order_[next_] == kRoot) gather_next(m, after_previous);
        if (o_.forward_prefetch && next_ < order_.size()) gather_next(m, after_previous);
        std::int32_t entered_first_forward = -1;  // first forward task of the unit entered last
        last_forward_ = after_previous;
        for (int l = 0; l < static_cast<int>(w_.layers.size()); ++l) {
            const int u = unit_of_[static_cast<std::size_t>(l)];
            const bool entering = unit(u).first_layer == l;
            if (entering && u != kRoot) {
                // Pre-forward of unit u. Without forward_prefetch its all-gather is issued
                // here; the CPU gets here once the previous unit's forward is issued, which
                // is modelled (§3.4, unverified) as: after the previous unit's first forward task.
                // On a CPU backend the model's thread computes that forward itself: after its last task.
                if (gather_[static_cast<std::size_t>(u)] < 0 && needs_gather(u)) {
                    DTSIM_ASSERT(next_ < order_.size() && order_[next_] == u, "units gather in forward order");
                    gather_next(m, config_.collectives_block_compute ? last_forward_ : entered_first_forward);
                }
                // forward_prefetch: the next unit's all-gather right after this one's (on a
                // CPU backend, where the model's thread issues it, after the forward so far).
                if (o_.forward_prefetch && next_ < order_.size())
                    gather_next(m, config_.collectives_block_compute ? last_forward_ : -1);
            }
            if (o_.fully_shard) {  // pre_forward's wait_for_unshard: the copy-out before the unit computes
                if (l == 0) copy_out(m, kRoot);
                if (entering) copy_out(m, u);
            }
            const std::int32_t deps[] = {entering ? gather_[static_cast<std::size_t>(u)] : -1,
                                         l == 0 ? gather_[static_cast<std::size_t>(kRoot)] : -1};
            const std::int32_t f = step().forward(m, l, deps);
            if (entering) entered_first_forward = f;
            last_forward_ = f;
            // _post_forward_reshard: FULL_SHARD / HYBRID_SHARD free after forward, except the root.
            if (unit(u).last_layer == l && (u != kRoot || o_.reshard_root) && reshard_after_forward_ &&
                unsharded_[static_cast<std::size_t>(u)])
                reshard(u, f);
        }
        // fully_shard: the root's post_forward frees the last kept all-gather output
        // (release_all_gather_state_for_comm_reuse).
        release_held(held_gather_output_, MemCategory::gathered);
    }

    // ---- backward (§3.3, §3.4, §3.8)
    void backward(int m) {
        // sync_gradients: no_sync() on all but the last micro-step, or every micro-step without it.
        const bool sync = !o_.no_sync || m == config_.grad_accum - 1;
        in_backward_ = true;
        start_pass();
        order_.clear();
        for (int u : backward_order_)
            if (needs_gather(u)) order_.push_back(u);
        next_ = 0;
        std::int32_t last_compute = last_forward_;
        std::int32_t unit_first_backward = -1;  // first backward task of the unit entered last
        for (int l = static_cast<int>(w_.layers.size()) - 1; l >= 0; --l) {
            const int u = unit_of_[static_cast<std::size_t>(l)];
            const bool entering = unit(u).last_layer == l;
            if (entering) {
                // Pre-backward hook of unit u, issued once the backward before it is.
                // Without a prefetch the unit all-gathers itself now (NONE; and the
                // first unit under BACKWARD_POST).
                if (gather_[static_cast<std::size_t>(u)] < 0 && needs_gather(u)) {
                    DTSIM_ASSERT(next_ < order_.size() && order_[next_] == u, "units gather in backward order");
                    gather_next(m, last_compute);
                }
                // fully_shard's pre_backward: unshard, wait_for_unshard (the copy-out), then prefetch.
                if (o_.fully_shard) copy_out(m, u);
                // BACKWARD_PRE: the next unit's all-gather right after this unit's,
                // before its gradient computation.
                if (o_.prefetch == Prefetch::backward_pre && next_ < order_.size()) gather_next(m, last_compute);
            }
            // A recompute (activation checkpointing) waits for these deps too, so it
            // adds no all-gather (§3.8).
            const std::int32_t deps[] = {entering ? gather_[static_cast<std::size_t>(u)] : -1};
            // The step builder may append a task after the backward (SyncBatchNorm's
            // all-reduce); memory is attached to, and frees wait for, the latest task.
            const std::int32_t first = step().backward(m, l, deps);
            const auto b = static_cast<std::int32_t>(plan_.tasks.size()) - 1;
            if (entering) {
                unit_first_backward = first;
                if (!grad_held_[static_cast<std::size_t>(u)] && unit(u).numel > 0) {
                    plan_.alloc(MemCategory::gradients, unsharded_grad_bytes(u));
                    grad_held_[static_cast<std::size_t>(u)] = 1;
                }
            }
            last_compute = b;
            if (unit(u).first_layer != l) continue;
            // Post-backward hook: the unit's gradient is complete. _should_free_in_backward:
            // sync_gradients or a RESHARD_AFTER_FORWARD strategy.
            if (unsharded_[static_cast<std::size_t>(u)] && (sync || reshard_after_forward_)) reshard(u, b);
            // BACKWARD_POST: the next unit's all-gather in _post_backward_reshard, which
            // _post_backward_hook calls before _reduce_grad: issued after this unit is
            // resharded and before its reduce-scatter, which then queues behind it on the
            // shard group's stream. The CPU runs ahead of the GPU: it reaches this hook
            // about when the unit's backward kernels are issued, modelled (as for forward
            // without forward_prefetch, §3.4, unverified) as after the unit's first
            // backward task (on a CPU backend: after its last, which that thread computes).
            // NONE waits for the unit's whole backward instead (the next unit's
            // pre-backward hook above).
            if (o_.prefetch == Prefetch::backward_post && next_ < order_.size())
                gather_next(m, config_.collectives_block_compute ? b : unit_first_backward);
            if (o_.fully_shard) {
                // foreach_reduce runs only when gradients sync (set_requires_gradient_sync);
                // otherwise the unsharded gradients stay, accumulating.
                previous_micro_step_ = sync ? reduce_fully_shard(m, u, b) : b;
                continue;
            }
            // The unit's gradient becomes one flat tensor: the parameters are views
            // of the flat parameter, and autograd's backward of that split
            // concatenates their gradients into a new one (FlatParamHandle;
            // torch.cat in a CPU profile of FSDP: 37.8 MB in 24 ms here, the
            // first touch of fresh pages included).
            const std::int32_t views[] = {b};
            const std::int32_t flat = step().pass(Phase::gradient_copy, 2 * unsharded_grad_bytes(u), 0, views, m);
            plan_.tasks.back().fresh_output = true;
            previous_micro_step_ = flat;
            if (sync) reduce(m, u, flat);
        }
        // The root's post-backward callback waits for the reductions and drops the
        // retained reduce-scatter input (fully_shard).
        release_held(held_reduce_input_, MemCategory::gradients);
    }

    // ---- step: the optimizer over this rank's shards, then zero_grad
    void optimizer_step() {
        const int last = config_.grad_accum - 1;
        if (o_.offload) {
            // torch.optim.Adam stepping the CPU shard once every D2H copy is done (§3.6).
            step().host_optimizer(shard_total_, cpu_stream_, reduced_, last, /*torch_optimizer=*/true);
            // The device shards go in the final callback, just before; charged at the
            // step's end, when the device holds nothing else of the step.
            plan_.release(MemCategory::gradients, grad_shards_);
            return;
        }
        // One flat parameter per unit (use_orig_params=False); the root's may be empty.
        // fully_shard keeps every parameter a tensor of its own (a DTensor's local shard).
        std::int64_t tensors = 0, largest = 0;
        if (o_.fully_shard) {
            for (const auto& layer : w_.layers)
                for (const auto& p : layer.params) {
                    ++tensors;
                    largest = std::max(largest, (p.numel() + shard_ranks_ - 1) / shard_ranks_);
                }
        } else {
            for (const Unit& u : units_) {
                tensors += u.shard > 0;
                largest = std::max(largest, u.shard);
            }
        }
        // _post_backward_final_callback waits for every reduction.
        step().optimizer_step({.elements = shard_total_,
                               .tensors = std::max<std::int64_t>(tensors, 1),
                               .largest = largest,
                               .impl = o_.optimizer_impl,
                               .element_bytes = o_.shard_bytes},
                              reduced_, last);
        plan_.release(MemCategory::gradients, grad_shards_);  // zero_grad(set_to_none=True)
    }

    // ---- what the report says of it
    void explain() {
        if (o_.fully_shard) {
            explain_fully_shard();
            return;
        }
        if (o_.checkpoint_policy)
            plan_.notes.push_back(
                fmt::format("activation_checkpointing_policy={{{}}}: checkpoint_wrapper around each {}, "
                            "whose forward runs again in backward (as --activation-checkpointing)",
                            w_.block_name(), w_.block_name()));
        // Which constructor applied: what a user reading the report must know, since
        // Lightning's FSDPStrategy and torch's FullyShardedDataParallel differ in
        // their defaults (docs/notes/library-memory-rules.md §2).
        const std::string param = std::string(to_string(o_.param_dtype)),
                          reduce = std::string(to_string(o_.reduce_dtype));
        if (o_.lightning) {
            const bool mixed = autocast(config_.precision);
            plan_.notes.push_back(fmt::format(
                "Lightning FSDPStrategy, as Lightning >= 2.6 builds it: {}; MixedPrecision(param_dtype={}, "
                "reduce_dtype={}){}.{}",
                o_.wrap_policy == "none" ? "no auto_wrap_policy, so one FSDP unit for the whole model"
                                         : "auto_wrap_policy=" + o_.wrap_policy,
                param, reduce, mixed ? " under torch.autocast" : "",
                mixed && o_.param_dtype != DType::fp32
                    ? " Lightning 2.1-2.5 kept fp32 parameters under the mixed precisions: add --set param_dtype=fp32 "
                      "--set reduce_dtype=" +
                          std::string(to_string(compute_dtype(config_.precision))) + " to model those versions."
                    : ""));
        } else {
            plan_.notes.push_back(fmt::format(
                "torch FullyShardedDataParallel(auto_wrap_policy={}, mixed_precision=MixedPrecision(param_dtype={}, "
                "reduce_dtype={})) as the knobs give it; Lightning's FSDPStrategy defaults differ: --strategy "
                "lightning:fsdp.",
                o_.wrap_policy, param, reduce));
        }
        int wrapped = 0;
        for (int u = 1; u < static_cast<int>(units_.size()); ++u) wrapped += unit(u).numel > 0;
        const std::string units_text =
            fmt::format("FSDP {}: {} wrapped units + the root ({:.1f} M parameters)", o_.sharding_name, wrapped,
                        static_cast<double>(unit(kRoot).numel) / 1e6);
        if (!sharded_) {
            // NO_SHARD (§3.3): replicated parameters, one all-reduce per unit (_reduce_grad_no_shard).
            plan_.notes.push_back(
                replicate_group_ >= 0
                    ? fmt::format("{}, parameters replicated on {} ranks; each unit's flat gradient all-reduced in {} "
                                  "after its backward (one all-reduce per unit, no buckets).",
                                  units_text, replicate_ranks_, reduce)
                    : fmt::format("{}, parameters on one rank: no gradient reduction.", units_text));
        } else {
            const std::string group = hybrid_ ? fmt::format("the {} ranks of each node", shard_ranks_)
                                              : fmt::format("{} ranks", shard_ranks_);
            const std::string gathers = reshard_after_forward_
                                            ? "before each unit's forward and again before its backward (the root "
                                              "only once: it stays unsharded after forward)"
                                            : "before each unit's forward, kept unsharded until after its backward";
            plan_.notes.push_back(fmt::format(
                "{}, flat parameters sharded over {}; all-gathers in {} {}; reduce-scatters in {}{}.", units_text,
                group, param, gathers, reduce,
                replicate_group_ >= 0 ? fmt::format(", then the gradient shard all-reduced in {} across {} nodes",
                                                    reduce, config_.topology.nodes)
                                      : ""));
        }
        const int micro_steps = config_.grad_accum;
        if (o_.offload && !sharded_)
            plan_.notes.push_back(
                "cpu_offload with NO_SHARD: the H2D copies of the whole parameters before each "
                "forward are not modelled.");
        if (micro_steps > 1 && o_.no_sync)
            plan_.notes.push_back(
                "Gradient accumulation uses no_sync(): no reductions before the last micro-step, unsharded gradients "
                "accumulate in memory.");
        if (micro_steps > 1 && !o_.no_sync) {
            plan_.notes.push_back(
                "Gradient accumulation without no_sync(): a gradient reduction every micro-step, sharded gradients "
                "accumulate.");
            if (o_.offload)
                plan_.notes.push_back(
                    "cpu_offload with no_sync=false: PyTorch's FSDP docs say gradient accumulation outside no_sync() "
                    "is not supported with CPU offload (the newly reduced gradient replaces the accumulated one); "
                    "only the cost is modelled.");
        }
    }

private:
    void explain_fully_shard() {
        int blocks = 0;
        for (int u = 1; u < static_cast<int>(units_.size()); ++u) blocks += unit(u).numel > 0;
        const std::string param = std::string(to_string(o_.param_dtype)),
                          reduce = std::string(to_string(o_.reduce_dtype));
        const bool reshard = o_.sharding == Sharding::full_shard || o_.sharding == Sharding::hybrid_shard;
        const bool mesh_2d = o_.sharding == Sharding::hybrid_shard || o_.sharding == Sharding::hybrid_shard_zero2;
        const std::string modules =
            o_.wrap_policy == "none" || blocks == 0
                ? fmt::format("the model alone ({:.1f} M parameters{})", static_cast<double>(unit(kRoot).numel) / 1e6,
                              o_.wrap_policy == "none" ? "" : "; it has no transformer blocks")
                : fmt::format("each of {} {}, then on the model (the root, {:.1f} M parameters)", blocks,
                              o_.wrap_policy == "blocks" ? "blocks" : "runs of layers",
                              static_cast<double>(unit(kRoot).numel) / 1e6);
        const std::string resharding = !reshard          ? "reshard_after_forward=False, "
                                       : o_.reshard_root ? "reshard_after_forward=True, "
                                                         : "";
        plan_.notes.push_back(fmt::format(
            "torch fully_shard (FSDP2) on {}, as fully_shard(module, "
            "{}{}mp_policy=MixedPrecisionPolicy(param_dtype={}, "
            "reduce_dtype={})): {}.",
            modules, mesh_2d ? "mesh=<2-D: replicate across nodes, shard inside each>, " : "", resharding, param,
            reduce,
            !reshard          ? "every group keeps its parameters from forward to backward"
            : o_.reshard_root ? "every group, the root too, reshards after forward and all-gathers again in backward"
                              : "the blocks reshard after forward and all-gather again in backward, the root keeps "
                                "its parameters (fully_shard's default)"));
        if (!sharded_) {
            plan_.notes.push_back(replicate_group_ >= 0
                                      ? fmt::format("One GPU a node: each group's gradients all-reduced in {} across "
                                                    "{} nodes, parameters whole.",
                                                    reduce, replicate_ranks_)
                                      : std::string("One rank: no collectives."));
        } else {
            plan_.notes.push_back(fmt::format(
                "Parameters sharded one by one over {}; each all-gather in {} is copied out into the unsharded "
                "parameters on the compute stream; gradients are copied into a reduce-scatter input in {} "
                "(chunk_cat){}.",
                hybrid_ ? fmt::format("the {} ranks of each node", shard_ranks_)
                        : fmt::format("{} ranks", shard_ranks_),
                param, reduce,
                replicate_group_ >= 0
                    ? fmt::format(", and each reduced shard all-reduced across {} nodes", config_.topology.nodes)
                    : ""));
        }
        if (config_.grad_accum > 1)
            plan_.notes.push_back(o_.no_sync ? "Gradient accumulation with set_requires_gradient_sync(False) on all "
                                               "but the last micro-step: unsharded gradients accumulate in memory."
                                             : "Gradient accumulation reduce-scatters every micro-step (fully_shard's "
                                               "default); the sharded gradients accumulate.");
    }

    StepBuilder& step() { return *step_; }
    const Unit& unit(int u) const { return units_[static_cast<std::size_t>(u)]; }

    // The shard group: all ranks, or the node for the hybrid strategies (§3.3).
    void shard_group_topology() {
        const auto& topo = config_.topology;
        sharding_ = o_.sharding;
        hybrid_ = sharding_ == Sharding::hybrid_shard || sharding_ == Sharding::hybrid_shard_zero2;
        shard_ranks_ = hybrid_ ? topo.gpus_per_node : topo.world_size();
        if (sharding_ != Sharding::no_shard && shard_ranks_ == 1) {
            // FSDP switches to NO_SHARD when its (shard) process group has one rank.
            plan_.notes.push_back(
                o_.fully_shard
                    ? std::string(
                          "fully_shard over a shard group of one rank: nothing to all-gather or reduce-scatter.")
                    : fmt::format("{} over a shard group of one rank: FSDP runs it as NO_SHARD.", o_.sharding_name));
            sharding_ = Sharding::no_shard;
            hybrid_ = false;
        }
        sharded_ = sharding_ != Sharding::no_shard;
        if (!sharded_) shard_ranks_ = 1;
        // _init_utils: DefaultState._get_gradient_predivide_factor of the data-parallel
        // world (the shard group times the replicate group): the power of two reached
        // by doubling while it divides the world and is below world / factor, about
        // its square root (4 for a world of 6). The postdivide factor is the rest,
        // world / predivide, a fraction for such worlds (torch 2.15).
        const int world = topo.world_size();
        predivide_ = 1;
        while (world % predivide_ == 0 && world / predivide_ > predivide_) predivide_ *= 2;
        postdivide_ = static_cast<double>(world) / predivide_;
        // RESHARD_AFTER_FORWARD_HANDLE_STRATEGIES = {FULL_SHARD, HYBRID_SHARD} (§3.3).
        reshard_after_forward_ = sharding_ == Sharding::full_shard || sharding_ == Sharding::hybrid_shard;
        replicate_ranks_ = hybrid_ ? topo.nodes : sharded_ ? 1 : topo.world_size();
    }

    // The units' shards, and each unit's FlatParameter as shard group u.
    void build_units() {
        for (Unit& u : units_) {
            u.shard = (u.numel + shard_ranks_ - 1) / shard_ranks_;
            u.padded = u.shard * shard_ranks_;
            shard_total_ += u.shard;
        }
        // Counted first, then filled: one array for all units (lowering runs thousands of times a second).
        std::vector<std::uint32_t> count(units_.size() + 1, 0);
        for (std::size_t l = 0; l < w_.layers.size(); ++l)
            count[static_cast<std::size_t>(unit_of_[l]) + 1] += static_cast<std::uint32_t>(w_.layers[l].params.size());
        for (std::size_t u = 0; u < units_.size(); ++u) {
            count[u + 1] += count[u];
            plan_.shards.push_back({count[u], count[u + 1] - count[u], shard_ranks_});
        }
        plan_.shard_params.resize(count.back());
        for (std::size_t l = 0; l < w_.layers.size(); ++l)
            for (const auto& p : w_.layers[l].params)
                plan_.shard_params[count[static_cast<std::size_t>(unit_of_[l])]++] = p.index;
        unsharded_.assign(units_.size(), 0);
        grad_held_.assign(units_.size(), 0);
        shard_held_.assign(units_.size(), 0);
    }

    void open_streams() {
        if (o_.param_dtype != DType::fp32)
            plan_.compute_dtype = o_.param_dtype;  // MixedPrecision casts the flat parameter
        // MixedPrecision casts the flat parameter itself, so with param_dtype equal to
        // the compute dtype autocast finds no fp32 weights to cache (§3.7, §6). NO_SHARD
        // keeps the copies, as the stand-in for its low-precision copy of each unit,
        // held from forward to backward.
        if (sharded_ && o_.param_dtype == w_.activation_dtype) step().set_autocast(false);
        shard_group_ = !sharded_ ? -1 : hybrid_ ? step().node_group() : step().world_group();
        replicate_group_ = replicate_ranks_ <= 1 ? -1 : hybrid_ ? step().cross_node_group() : step().world_group();
        shard_group_stream_ = sharded_ ? step().stream("shard group", TaskKind::collective) : -1;
        all_reduce_stream_ = replicate_group_ >= 0 ? step().stream("all-reduce", TaskKind::collective) : -1;
        h2d_stream_ = o_.offload && sharded_ ? step().stream("h2d", TaskKind::copy) : -1;
        d2h_stream_ = o_.offload ? step().stream("d2h", TaskKind::copy) : -1;
        cpu_stream_ = o_.offload ? step().stream("cpu", TaskKind::host_compute) : -1;
    }

    // Model states (§3.9, §8): fp32 parameter shard and Adam's two moments over
    // Ψ/N parameters (Ψ for NO_SHARD); on the host with
    // CPUOffload(offload_params=True) (§3.6), which also pins a gradient shard
    // there for good (`_cpu_grad`). On the device the fp32 gradient shard exists
    // only from each unit's reduction to zero_grad (see `reduce`).
    void place_model_states() {
        const std::int64_t model_states[] = {o_.shard_bytes * shard_total_, config_.optimizer == OptimizerKind::adam
                                                                                ? 2 * o_.shard_bytes * shard_total_
                                                                                : 0};
        const MemCategory model_categories[] = {MemCategory::parameters, MemCategory::optimizer_states};
        for (int i = 0; i < 2; ++i)
            plan_.resident[static_cast<std::size_t>(o_.offload ? MemCategory::host : model_categories[i])] +=
                model_states[i];
        if (o_.offload) plan_.resident[static_cast<std::size_t>(MemCategory::host)] += o_.shard_bytes * shard_total_;
    }

    // _FreeEventQueue (§3.5): each free of unsharded parameters enqueues the task
    // after which they are freed; before an all-gather is issued, when two frees
    // are pending, the CPU waits for the oldest. So the all-gather of unit k+2
    // waits for the free of unit k.
    std::int32_t limiter() {
        if (!o_.limit_all_gathers || pending_frees_.size() < 2) return -1;
        const std::int32_t oldest = pending_frees_.front();
        pending_frees_.pop_front();
        return oldest;
    }

    bool needs_gather(int u) const { return sharded_ && !unsharded_[static_cast<std::size_t>(u)] && unit(u).numel > 0; }

    // The next unit of order_ all-gathers, issued after `issue_after`.
    void gather_next(int m, std::int32_t issue_after) {
        const int u = order_[next_++];
        gather_[static_cast<std::size_t>(u)] = unshard(m, u, issue_after);
    }

    // Unshard (§3.2, §3.6): with CPU offload the fp32 shard is copied H2D first;
    // then the padded flat parameter is all-gathered in param_dtype (its bytes
    // are the total output, nccl-tests' convention). `issue_after`: the compute
    // task after which the hook issuing it runs (-1: none).
    std::int32_t unshard(int m, int u, std::int32_t issue_after) {
        const Unit& un = unit(u);
        std::int32_t ready = issue_after;
        if (o_.offload) {
            const std::int32_t deps[] = {issue_after};
            ready = step().copy(Transfer::h2d, o_.shard_bytes * un.shard, h2d_stream_, deps, m);
            plan_.tasks.back().bucket = u;
            plan_.alloc(MemCategory::gathered, o_.shard_bytes * un.shard);
        }
        const std::int32_t deps[] = {ready, o_.fully_shard ? copy_out_bound() : limiter()};
        const std::int32_t gather = step().collective(CollectiveKind::allgather, un.padded * o_.param_bytes,
                                                      shard_group_, shard_group_stream_, deps, m, u, o_.param_dtype);
        plan_.set_role(CollectiveRole::parameter_gather, {u});
        step().synchronous_collective(gather);  // _all_gather_flat_param: dist.all_gather, no async_op
        plan_.alloc(MemCategory::gathered, un.padded * o_.param_bytes);
        if (o_.offload) plan_.release(MemCategory::gathered, o_.shard_bytes * un.shard);
        // fully_shard in forward: this group's wait_for_unshard, right after it issues
        // the all-gather, drops the output the group before it kept (all_gather_state).
        if (o_.fully_shard && !in_backward_) release_held(held_gather_output_, MemCategory::gathered);
        unsharded_[static_cast<std::size_t>(u)] = 1;
        return gather;
    }

    // A forward or backward pass starts: no unit all-gathered or copied out yet.
    void start_pass() {
        std::fill(gather_.begin(), gather_.end(), -1);
        copied_.assign(units_.size(), 0);
        copy_outs_.clear();
    }

    // fully_shard's bound on all-gathers in flight (FSDPCommContext's
    // all_gather_state): in forward, wait_for_unshard of group k keeps its
    // all-gather output until group k+1's wait_for_unshard, which orders the
    // all-gather streams after group k's copy-out, so group k+2's all-gather
    // waits for it; in backward each wait_for_unshard orders them after its own
    // copy-out at once, before the prefetch.
    std::int32_t copy_out_bound() const {
        const std::size_t back = in_backward_ ? 1 : 2;
        return copy_outs_.size() >= back ? copy_outs_[copy_outs_.size() - back] : -1;
    }

    // fully_shard's wait_for_unshard: foreach_all_gather_copy_out copies the
    // all-gather output into each unsharded parameter (split_with_sizes_copy,
    // reading and writing the unit once) on the compute stream. The output is
    // freed then in backward; in forward it is kept (implicit prefetching) until
    // the next group's all-gather is issued, or the root's post_forward. The
    // unit's compute now waits for the copy.
    void copy_out(int m, int u) {
        std::int32_t& g = gather_[static_cast<std::size_t>(u)];
        if (g < 0 || copied_[static_cast<std::size_t>(u)]) return;
        copied_[static_cast<std::size_t>(u)] = 1;
        const std::int64_t bytes = unit(u).padded * o_.param_bytes;
        const std::int32_t deps[] = {g};
        g = step().pass(Phase::parameter_copy, 2 * bytes, 0, deps, m);
        plan_.tasks.back().fresh_output = true;
        plan_.alloc(MemCategory::gathered, bytes);  // the unsharded parameters
        copy_outs_.push_back(g);
        if (in_backward_) {
            plan_.release(MemCategory::gathered, bytes);
        } else {
            release_held(held_gather_output_, MemCategory::gathered);  // none left, unless no all-gather came between
            held_gather_output_ = bytes;
        }
    }

    // Frees `bytes` of `category` held past their use, when the latest task ends.
    void release_held(std::int64_t& bytes, MemCategory category) {
        if (bytes > 0) plan_.release(category, bytes);
        bytes = 0;
    }

    // fully_shard's post_backward for unit u, whose gradients are complete after
    // `grad_ready` (foreach_reduce, _fsdp_collectives.py): chunk_cat copies the
    // unsharded gradients into a new reduce-scatter input in reduce_dtype, on
    // the compute stream, and they are freed; the reduce-scatter writes a new
    // shard, which becomes the sharded gradients (views, or a cast to the
    // parameters' dtype), or is added into them when accumulating. The input is
    // kept until the next group's post_backward (reduce_scatter_max_input_buffers,
    // 1). fp32 and bf16 reduce with ReduceOp.AVG, no division kernels; fp16
    // divides around the collectives as FSDP1 does (_get_gradient_divide_factors).
    std::int32_t reduce_fully_shard(int m, int u, std::int32_t grad_ready) {
        const Unit& un = unit(u);
        if (un.numel == 0) return grad_ready;
        grad_held_[static_cast<std::size_t>(u)] = 0;
        const std::int32_t grads[] = {grad_ready};
        const std::int32_t copied =
            step().pass(Phase::gradient_copy, un.padded * (o_.param_bytes + o_.reduce_bytes), 0, grads, m);
        plan_.tasks.back().fresh_output = true;
        const std::int64_t input = un.padded * o_.reduce_bytes;
        plan_.alloc(MemCategory::gradients, input);
        plan_.release(MemCategory::gradients, unsharded_grad_bytes(u));
        release_held(held_reduce_input_, MemCategory::gradients);
        if (!sharded_) {
            // A shard group of one rank: no reduce-scatter, the input is the gradient;
            // across nodes (a 2-D mesh of one GPU a node) it is all-reduced.
            std::int32_t done = copied;
            if (replicate_group_ >= 0) {
                const std::int32_t after[] = {copied};
                done = step().collective(CollectiveKind::allreduce, input, replicate_group_, all_reduce_stream_, after,
                                         m, u, o_.reduce_dtype);
                plan_.set_role(CollectiveRole::gradient_reduce, {u});
                step().synchronous_collective(done);
            }
            keep_grad_shard(u, input, true);  // the input is the gradient
            reduced_.push_back(done);
            return copied;
        }
        held_reduce_input_ = input;
        const bool divides = o_.reduce_dtype == DType::fp16;
        const std::int32_t divided = divides ? divide(un.padded, predivide_, copied, m, shard_group_stream_) : copied;
        const std::int32_t after[] = {divided};
        std::int32_t done = step().collective(CollectiveKind::reduce_scatter, input, shard_group_, shard_group_stream_,
                                              after, m, u, o_.reduce_dtype);
        plan_.set_role(CollectiveRole::gradient_reduce, {u});
        step().synchronous_collective(done);
        const std::int64_t output = un.shard * o_.reduce_bytes;
        plan_.alloc(MemCategory::gradients, output);
        if (replicate_group_ >= 0) {  // HSDP: the shard all-reduced across nodes, on its own stream
            const std::int32_t rs[] = {done};
            done = step().collective(CollectiveKind::allreduce, output, replicate_group_, all_reduce_stream_, rs, m, u,
                                     o_.reduce_dtype);
            step().synchronous_collective(done);
        }
        if (divides)
            done = divide(un.shard, postdivide_, done, m,
                          replicate_group_ >= 0 ? all_reduce_stream_ : shard_group_stream_);
        keep_grad_shard(u, output, true);
        reduced_.push_back(done);
        return copied;
    }

    // Frees unit u's unsharded parameters when `task` (the latest task) ends.
    void reshard(int u, std::int32_t task) {
        plan_.release(MemCategory::gathered, unit(u).padded * o_.param_bytes);
        unsharded_[static_cast<std::size_t>(u)] = 0;
        pending_frees_.push_back(task);
    }

    // The unit's unsharded gradient, in param_dtype, from its first backward to
    // its reduction (under no_sync, the last micro-step's; §3.3, §6).
    std::int64_t unsharded_grad_bytes(int u) const { return unit(u).padded * o_.param_bytes; }

    // The unit's fp32 gradient shard (the whole flat gradient under NO_SHARD):
    // _accumulate_sharded_grad casts each reduction's output to the flat
    // parameter's dtype and keeps it in _saved_grad_shard, or adds to it, until
    // zero_grad(set_to_none=True) after the step (_runtime_utils.py;
    // docs/notes/library-memory-rules.md §5). With CPU offload that device
    // shard is freed by the final callback, once copied into `_cpu_grad`.
    // At unit u's reduction (the latest task): the shard replaces `replaced`
    // bytes, what the reduction read or wrote (FSDP1: the unsharded gradient and
    // its reduce_dtype cast; fully_shard: the reduce-scatter's output). When
    // `in_place` and the sizes agree, that buffer itself is kept (FSDP1's
    // NO_SHARD in its own dtype; fully_shard's views of the output,
    // _cast_and_view_sharded_grads); a later micro-step adds into the kept shard.
    void keep_grad_shard(int u, std::int64_t replaced, bool in_place) {
        const std::int64_t kept = o_.shard_bytes * unit(u).shard;
        if (shard_held_[static_cast<std::size_t>(u)]) {  // accumulating: added into the kept shard
            plan_.release(MemCategory::gradients, replaced);
            return;
        }
        shard_held_[static_cast<std::size_t>(u)] = 1;
        grad_shards_ += kept;
        if (in_place && replaced == kept) return;
        plan_.alloc(MemCategory::gradients, kept);
        plan_.release(MemCategory::gradients, replaced);
    }

    // Gradient reduction of unit u after `grad_ready` (§3.2, §3.3, §3.6).
    void reduce(int m, int u, std::int32_t grad_ready) {
        const Unit& un = unit(u);
        if (un.numel == 0) return;
        grad_held_[static_cast<std::size_t>(u)] = 0;
        std::int32_t done = grad_ready;
        const std::int64_t cast = o_.reduce_bytes != o_.param_bytes ? un.padded * o_.reduce_bytes : 0;
        // _reduce_grad and _reduce_grad_no_shard divide in place around the
        // collective (`_div_if_needed`): the unsharded gradient by the predivide
        // factor before it, the reduced gradient by the postdivide factor after it.
        const std::int64_t reduced_elements = sharded_ ? un.shard : un.numel;
        const int reduce_stream = replicate_group_ >= 0 && !sharded_ ? all_reduce_stream_ : shard_group_stream_;
        const std::int32_t divided = divide(un.padded, predivide_, grad_ready, m, reduce_stream);
        const std::int32_t after[] = {divided};
        if (sharded_) {
            done = step().collective(CollectiveKind::reduce_scatter, un.padded * o_.reduce_bytes, shard_group_,
                                     shard_group_stream_, after, m, u, o_.reduce_dtype);
            plan_.set_role(CollectiveRole::gradient_reduce, {u});
            step().synchronous_collective(done);  // _reduce_grad: dist.reduce_scatter_single, no async_op
            // The gradient cast to reduce_dtype lives with the unsharded one until the reduce-scatter ends.
            plan_.alloc(MemCategory::gradients, cast);
            keep_grad_shard(u, unsharded_grad_bytes(u) + cast, !sharded_);
            if (replicate_group_ >= 0) {
                // HYBRID: all-reduce of the gradient shard across nodes (_inter_node_pg).
                const std::int32_t rs[] = {done};
                done = step().collective(CollectiveKind::allreduce, un.shard * o_.reduce_bytes, replicate_group_,
                                         all_reduce_stream_, rs, m, u, o_.reduce_dtype);
                step().synchronous_collective(done);
            }
        } else if (replicate_group_ >= 0) {
            // NO_SHARD: all-reduce of the unit's flat gradient (_reduce_grad_no_shard).
            done = step().collective(CollectiveKind::allreduce, un.numel * o_.reduce_bytes, replicate_group_,
                                     all_reduce_stream_, after, m, u, o_.reduce_dtype);
            plan_.set_role(CollectiveRole::gradient_reduce, {u});
            step().synchronous_collective(done);  // _reduce_grad_no_shard: dist.all_reduce, no async_op
            plan_.alloc(MemCategory::gradients, cast);
            keep_grad_shard(u, unsharded_grad_bytes(u) + cast, !sharded_);
        } else {
            keep_grad_shard(u, unsharded_grad_bytes(u), !sharded_);  // one rank: nothing to reduce
        }
        if (done != grad_ready)
            done = divide(reduced_elements, postdivide_, done, m,
                          replicate_group_ >= 0 ? all_reduce_stream_ : shard_group_stream_);
        if (o_.offload) {
            // _offload_grad: the fp32 gradient shard goes D2H into pinned memory (§3.6).
            const std::int32_t deps[] = {done};
            done = step().copy(Transfer::d2h, o_.shard_bytes * un.shard, d2h_stream_, deps, m);
            plan_.tasks.back().bucket = u;
        }
        reduced_.push_back(done);
    }

    // `tensor.div_(factor)` over `elements` of the reduce dtype after `after`,
    // when the factor is above one; returns the task it adds, or `after`. On GPUs
    // it runs where _reduce_grad runs, on the post-backward stream (`stream`: the
    // reduction's), beside the next unit's backward.
    std::int32_t divide(std::int64_t elements, double factor, std::int32_t after, int m, int stream = -1) {
        if (factor <= 1 || elements <= 0) return after;
        const std::int32_t deps[] = {after};
        // On a CPU backend the post-backward stream is the training thread itself.
        if (config_.collectives_block_compute) stream = -1;
        return step().pass(Phase::compression, 2 * elements * o_.reduce_bytes, static_cast<double>(elements), deps, m,
                           stream);
    }

    const models::Workload& w_;
    const Config& config_;
    const FsdpOptions& o_;
    Plan& plan_;
    std::optional<StepBuilder> step_;
    // The groups, after FSDP's NO_SHARD fallback for a one-rank shard group.
    Sharding sharding_ = Sharding::full_shard;
    bool hybrid_ = false, sharded_ = true, reshard_after_forward_ = true;
    int shard_ranks_ = 1, replicate_ranks_ = 1;
    int predivide_ = 1;  // FSDP's gradient division around the reduction
    double postdivide_ = 1;
    int shard_group_ = -1, replicate_group_ = -1;
    int shard_group_stream_ = -1, all_reduce_stream_ = -1, h2d_stream_ = -1, d2h_stream_ = -1, cpu_stream_ = -1;
    // The units.
    std::vector<int> unit_of_;
    std::vector<Unit> units_;
    std::int64_t shard_total_ = 0;  // Ψ/N: parameters this rank owns
    std::vector<int> backward_order_;
    // Where the step stands.
    std::deque<std::int32_t> pending_frees_;
    std::vector<char> unsharded_;   // the unit's full parameters are allocated
    std::vector<char> grad_held_;   // the unit's unsharded gradient is allocated
    std::vector<char> shard_held_;  // the unit's fp32 gradient shard is allocated
    std::int64_t grad_shards_ = 0;  // bytes of them allocated
    std::vector<std::int32_t> reduced_;
    std::vector<std::int32_t> gather_;  // this pass's all-gather of each unit (-1: none yet)
    std::vector<int> order_;            // units to all-gather in this pass, in hook order
    std::size_t next_ = 0;              // the next of order_ to all-gather
    std::int32_t last_forward_ = -1;
    std::int32_t previous_micro_step_ = -1;  // the model thread's last task of the micro-step before (its last flatten)
    // fully_shard: the pass in progress, the copy-outs done in it, and the
    // buffers kept past their use.
    bool in_backward_ = false;
    std::vector<char> copied_;             // the unit's all-gather is copied out in this pass
    std::vector<std::int32_t> copy_outs_;  // this pass's copy-out tasks, in order
    std::int64_t held_gather_output_ = 0;  // forward's last all-gather output (all_gather_state)
    std::int64_t held_reduce_input_ = 0;   // the last reduce-scatter input (reduce_scatter_states)
};

Plan run_fsdp(const models::Workload& w, const Config& config, const FsdpOptions& options,
              std::vector<int> layer_units) {
    std::vector<int> unit_of;
    std::vector<Unit> units = wrap_units(w, std::move(layer_units), unit_of);
    Plan plan;
    FsdpLowering fsdp(w, config, options, plan, std::move(units), std::move(unit_of));
    for (int m = 0; m < config.grad_accum; ++m) {
        fsdp.forward(m);
        fsdp.backward(m);
    }
    fsdp.optimizer_step();
    fsdp.explain();
    return plan;
}

Plan lower_fsdp(const models::Workload& w, const Config& config, const Knobs& knobs) {
    return run_fsdp(w, config, parse_options(w, config, knobs), fsdp_unit_of_layer(w, knobs));
}

// torch's fully_shard as torchtitan applies it: fully_shard(block) for every
// transformer block (or every run of layers of min_num_params, or nothing),
// then fully_shard(model) for the rest (the root).
Plan lower_fully_shard(const models::Workload& w, const Config& config, const Knobs& knobs) {
    const std::string& units = knobs.text("units");
    return run_fsdp(w, config, parse_fully_shard_options(config, knobs),
                    fsdp_unit_of_layer(w, units == "blocks" ? "transformer" : units,
                                       units == "size" ? knobs.number("min_num_params") : 0));
}

}  // namespace

void register_fsdp(Registry<Strategy>& r) {
    Strategy s;
    s.lower = lower_fsdp;
    // Under a mixed precision autocast sees the parameters MixedPrecision hands
    // the forward: fp32 with param_dtype=fp32, else the 16-bit flat parameter (§3.7).
    s.autocast = [](const Config& config, const Knobs& knobs) {
        const DType param_dtype = resolve_dtype(knobs.text("param_dtype"), compute_dtype(config.precision));
        return param_dtype == DType::fp32 ? models::Autocast::fp32_weights : models::Autocast::half_weights;
    };
    s.knobs = {
        {.name = "sharding_strategy",
         .type = KnobType::choice,
         .default_value = "FULL_SHARD",
         .description =
             "ShardingStrategy: what is sharded (parameters, gradients, optimizer state) and over which ranks",
         .choices = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "_HYBRID_SHARD_ZERO2"}},
        {.name = "backward_prefetch",
         .type = KnobType::choice,
         .default_value = "BACKWARD_PRE",
         .description = "BackwardPrefetch: when the next unit's all-gather is issued in backward (NONE: no prefetch)",
         .choices = {"BACKWARD_PRE", "BACKWARD_POST", "NONE"}},
        {.name = "forward_prefetch",
         .type = KnobType::boolean,
         .default_value = "false",
         .description = "issue the next unit's all-gather before this unit's forward"},
        {.name = "limit_all_gathers",
         .type = KnobType::boolean,
         .default_value = "true",
         .description =
             "rate limiter: at most two pending frees of unsharded parameters before an all-gather is issued"},
        {.name = "cpu_offload",
         .type = KnobType::boolean,
         .default_value = "false",
         .description =
             "CPUOffload(offload_params=True): parameter and gradient shards on the host, optimizer step on the CPU"},
        {.name = "no_sync",
         .type = KnobType::boolean,
         .default_value = "true",
         .description =
             "accumulate with model.no_sync() on all but the last micro-step (false: reduce-scatter every micro-step "
             "into the sharded gradient, §6 table)"},
        {.name = "param_dtype",
         .type = KnobType::choice,
         .default_value = "auto",
         .description =
             "MixedPrecision.param_dtype (all-gathers and compute); auto: the --precision's 16-bit type, fp32 without",
         .choices = {"auto", "fp32", "fp16", "bf16"}},
        {.name = "reduce_dtype",
         .type = KnobType::choice,
         .default_value = "auto",
         .description = "MixedPrecision.reduce_dtype (gradient reductions); auto: param_dtype",
         .choices = {"auto", "fp32", "fp16", "bf16"}},
        {.name = "auto_wrap_policy",
         .type = KnobType::choice,
         .default_value = "transformer",
         .description =
             "units: transformer = one per transformer block, size = consecutive layers up to min_num_params, none = "
             "one unit, the root (no policy: Lightning's FSDPStrategy default)",
         .choices = {"transformer", "size", "none"}},
        {.name = "frontend",
         .type = KnobType::choice,
         .default_value = "torch",
         .description =
             "who builds FSDP: torch = FullyShardedDataParallel(...) with these knobs; lightning = Lightning's "
             "FSDPStrategy, which wraps nothing unless auto_wrap_policy is given (set by --strategy lightning:fsdp and "
             "fsdp_cpu_offload; the report says which applied)",
         .choices = {"torch", "lightning"}},
        {.name = "transformer_layer_cls",
         .type = KnobType::class_names,
         .default_value = "auto",
         .description =
             "transformer_auto_wrap_policy's transformer_layer_cls (Lightning: auto_wrap_policy={Block}); auto: the "
             "model's block class, the one class dtsim wraps",
         .applies_when = "auto_wrap_policy=transformer"},
        {.name = "activation_checkpointing_policy",
         .type = KnobType::class_names,
         .default_value = "none",
         .description =
             "Lightning FSDPStrategy(activation_checkpointing_policy={Block}): checkpoint every module of the model's "
             "block class (e.g. LlamaDecoderLayer, GPT2Block), as --activation-checkpointing does"},
        {.name = "min_num_params",
         .type = KnobType::number,
         .default_value = "1e8",
         .description = "size_based_auto_wrap_policy's min_num_params (auto_wrap_policy=size)",
         .min_exclusive = true},
    };
    for (auto& k : torch_optimizer_knobs()) s.knobs.push_back(std::move(k));
    r.add("fsdp",
          "PyTorch FullyShardedDataParallel (FSDP1): per-unit all-gather before use, reduce-scatter after backward, "
          "prefetching overlapped with compute",
          s);

    Strategy f;
    f.lower = lower_fully_shard;
    f.autocast = s.autocast;
    f.knobs = {
        {.name = "reshard_after_forward",
         .type = KnobType::choice,
         .default_value = "auto",
         .description = "fully_shard(reshard_after_forward=...): auto (not given) frees each block's unsharded "
                        "parameters after its forward and all-gathers them again in backward, the root keeping its "
                        "own; true (given to every call, as torchtitan does) reshards the root too; false keeps "
                        "every group's until after backward",
         .choices = {"auto", "true", "false"}},
        {.name = "units",
         .type = KnobType::choice,
         .default_value = "blocks",
         .description = "the modules given to fully_shard before the model: blocks = each transformer block "
                        "(torchtitan), size = runs of consecutive layers of min_num_params (e.g. each Linear of an "
                        "MLP), none = the model alone",
         .choices = {"blocks", "size", "none"}},
        {.name = "min_num_params",
         .type = KnobType::number,
         .default_value = "1e8",
         .description = "with units=size: the parameters of a run of layers given to fully_shard",
         .min_exclusive = true,
         .applies_when = "units=size"},
        {.name = "hsdp",
         .type = KnobType::boolean,
         .default_value = "false",
         .description = "a 2-D DeviceMesh (replicate across nodes, shard inside each node): each reduced gradient "
                        "shard is all-reduced across nodes (torchtitan's dp_replicate = nodes)"},
        {.name = "requires_gradient_sync",
         .type = KnobType::boolean,
         .default_value = "true",
         .description = "with --grad-accum: reduce-scatter every micro-step (true, fully_shard's default); false: "
                        "model.set_requires_gradient_sync(False) on all but the last micro-step, holding unsharded "
                        "gradients"},
        {.name = "param_dtype",
         .type = KnobType::choice,
         .default_value = "auto",
         .description = "MixedPrecisionPolicy.param_dtype (all-gathers and compute); auto: the --precision's 16-bit "
                        "type, fp32 without",
         .choices = {"auto", "fp32", "fp16", "bf16"}},
        {.name = "reduce_dtype",
         .type = KnobType::choice,
         .default_value = "auto",
         .description = "MixedPrecisionPolicy.reduce_dtype (gradient reductions); auto: param_dtype (torchtitan sets "
                        "fp32)",
         .choices = {"auto", "fp32", "fp16", "bf16"}},
    };
    for (auto& k : torch_optimizer_knobs()) f.knobs.push_back(std::move(k));
    r.add("fsdp2",
          "PyTorch fully_shard (FSDP2), as torchtitan applies it: each block then the model, per-parameter shards, "
          "all-gathers copied out and gradients copied in on the compute stream",
          f);
}

}  // namespace dtsim::sim
