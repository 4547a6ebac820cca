// post_localSGD_hook with PeriodicModelAverager (strategy-semantics.md §2.4):
// global gradient allreduces until start_localSGD_iter, then allreduces inside
// each node only (dist.new_subgroups(): one subgroup per node), or none at
// all; every model_averaging_period steps the averager allreduces all the
// parameters over the world after the optimizer step.
//
// With one node the subgroup is the whole world, so the "local" allreduce is
// the global one and only the averaging steps add communication.
//
// Counting: PostLocalSGDState.iter and PeriodicModelAverager.step are both 0
// in the first iteration, so Config::iteration i (1-based) runs with i - 1.
#include "dtsim/common/error.hpp"
#include "dtsim/sim/comm_hook.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace dtsim::sim {
namespace {

constexpr std::int64_t kFp32 = 4;

struct Settings {
    std::int64_t start = 100;
    bool local_allreduce = true;
    std::int64_t period = 4;
    std::int64_t warmup_steps = 0;
};

std::int64_t whole_number(const Knobs& knobs, const char* name) {
    const double x = knobs.number(name);
    if (x != std::floor(x)) throw ConfigError(fmt::format("--set {}={}: expected a whole number", name, x));
    return static_cast<std::int64_t>(x);
}

Settings settings(const Knobs& knobs) {
    // model_averaging_period=1 averages every step; torch warns against it but accepts it.
    return {whole_number(knobs, "start_localSGD_iter"), knobs.boolean("post_local_gradient_allreduce"),
            whole_number(knobs, "model_averaging_period"), whole_number(knobs, "warmup_steps")};
}

bool global_phase(const Settings& s, std::int64_t iteration) {
    return iteration - 1 < s.start;
}

// PeriodicModelAverager.average_parameters: step >= warmup_steps and
// (step - warmup_steps) % period == 0.
bool averaging_step(const Settings& s, std::int64_t iteration) {
    const std::int64_t step = iteration - 1;
    return step >= s.warmup_steps && (step - s.warmup_steps) % s.period == 0;
}

// _allreduce_fut: tensor.div_(group size) on the compute stream (the Reducer
// does not divide when a hook is registered, §1.4), then the allreduce.
std::int32_t divided_allreduce(HookContext& ctx, const BucketInfo& bucket, std::int32_t ready, int group) {
    const std::int32_t ready_deps[] = {ready};
    const std::int32_t div = ctx.step.pass(Phase::compression, 2 * bucket.bytes,
                                           static_cast<double>(bucket.bytes / kFp32), ready_deps, ctx.micro_step);
    const std::int32_t deps[] = {div};
    return ctx.step.collective(CollectiveKind::allreduce, bucket.bytes, group, ctx.stream, deps, ctx.micro_step,
                               bucket.index);
}

std::int32_t post_local_reduce(HookContext& ctx, const BucketInfo& bucket, std::int32_t ready) {
    const Settings s = settings(ctx.knobs);
    if (global_phase(s, ctx.iteration)) return divided_allreduce(ctx, bucket, ready, ctx.group);
    // No gradient communication: the future is already resolved.
    if (!s.local_allreduce) return ready;
    return divided_allreduce(ctx, bucket, ready, ctx.step.node_group());
}

// utils.average_parameters: flat = torch.cat(all parameters) (a new 4Ψ
// buffer), flat /= world, torch.cuda.synchronize(), one world allreduce of
// 4Ψ bytes, then each p.data becomes a view into flat: no copy back, and the
// old parameter storage is freed, so the extra 4Ψ lasts until the allreduce ends.
std::int32_t post_local_after_step(HookContext& ctx, std::int32_t step) {
    const Settings s = settings(ctx.knobs);
    if (!averaging_step(s, ctx.iteration)) return step;
    const std::int64_t params = ctx.step.workload().param_count() * kFp32;
    const std::int32_t step_deps[] = {step};
    const std::int32_t cat = ctx.step.pass(Phase::gradient_copy, 2 * params, 0, step_deps, ctx.micro_step);
    ctx.step.plan().alloc(MemCategory::other, params);
    const std::int32_t cat_deps[] = {cat};
    const std::int32_t div =
        ctx.step.pass(Phase::gradient_copy, 2 * params, static_cast<double>(params / kFp32), cat_deps, ctx.micro_step);
    // The device sync: the allreduce is issued once the division (and all
    // earlier work on every stream) has finished.
    const std::int32_t div_deps[] = {div};
    const std::int32_t allreduce = ctx.step.collective(CollectiveKind::allreduce, params, ctx.step.world_group(),
                                                       ctx.stream, div_deps, ctx.micro_step);
    ctx.step.plan().release(MemCategory::other, params);
    return allreduce;
}

std::vector<StepPhase> post_local_phases(const Config&, const Knobs& knobs) {
    const Settings s = settings(knobs);
    // Iterations past start_localSGD_iter and warmup_steps, one of each kind.
    const std::int64_t base = std::max({Config::kSteadyIteration, s.start + 1, s.warmup_steps + 1});
    const std::int64_t local = averaging_step(s, base) ? base + 1 : base;
    const std::int64_t averaging = base + (s.period - (base - 1 - s.warmup_steps) % s.period) % s.period;
    const double period = static_cast<double>(s.period);
    std::vector<StepPhase> phases;
    if (s.period > 1) phases.push_back({"local step", local, (period - 1) / period});
    phases.push_back({"averaging step", averaging, 1 / period});
    // Iteration 2 runs on rebuilt buckets and is still global for any start >= 2.
    if (global_phase(s, 2)) phases.push_back({"warm-up: global allreduce until start_localSGD_iter", 2, 0.0});
    return phases;
}

KnobSpec knob(const char* name, KnobType type, const char* default_value, const char* description,
              double min_value = 0) {
    KnobSpec k;
    k.name = name;
    k.type = type;
    k.default_value = default_value;
    k.description = description;
    k.min_value = min_value;
    return k;
}

}  // namespace

void register_post_local_sgd_hook(Registry<CommHook>& r) {
    CommHook h;
    h.knobs = {
        knob("start_localSGD_iter", KnobType::number, "100",
             "iterations of global gradient allreduce before switching to local SGD"),
        knob("post_local_gradient_allreduce", KnobType::boolean, "true",
             "after the start, allreduce gradients inside each node (false: no gradient communication)"),
        knob("model_averaging_period", KnobType::number, "4",
             "PeriodicModelAverager period: average the parameters over all ranks every this many steps (torch "
             "warns against 1)",
             1),
        knob("warmup_steps", KnobType::number, "0", "PeriodicModelAverager steps before the first averaging"),
    };
    h.reduce = post_local_reduce;
    h.after_step = post_local_after_step;
    h.phases = post_local_phases;
    r.add("post_localSGD",
          "post_localSGD_hook + PeriodicModelAverager: intra-node gradient allreduce after start_localSGD_iter, a "
          "global parameter average every model_averaging_period steps",
          h);
}

}  // namespace dtsim::sim
