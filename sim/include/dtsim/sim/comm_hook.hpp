// DDP communication hooks (strategy-semantics.md §2): how one gradient bucket
// is reduced. Each hook is one small unit under sim/strategies/hooks/,
// registered by the name torch users know (`--set comm_hook=powerSGD`); its
// knobs join DDP's and are accepted only together with it.
#pragma once

#include "dtsim/common/registry.hpp"
#include "dtsim/sim/knobs.hpp"
#include "dtsim/sim/plan.hpp"
#include "dtsim/sim/step_builder.hpp"
#include "dtsim/sim/strategy.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace dtsim::sim {

struct HookContext {
    StepBuilder& step;
    const Knobs& knobs;
    int stream;  // DDP's communication stream
    int group;   // all ranks
    int micro_step;
    // Parameter shapes by index (PowerSGD views each gradient as a matrix).
    const std::vector<const models::Parameter*>& params;
    // Which iteration is simulated (Config::iteration).
    std::int64_t iteration;
};

struct CommHook {
    std::vector<KnobSpec> knobs;
    // Emits the tasks that reduce `bucket` once `ready` has ended; returns the
    // task after which the bucket's result is in place (finalize_backward waits
    // for it). Tasks on the communication stream keep DDP's launch order.
    // The hook sees each bucket as a GradBucket of fp32 gradients (Plan::buckets).
    std::int32_t (*reduce)(HookContext& ctx, const BucketInfo& bucket, std::int32_t ready);
    // Device memory the hook keeps across steps (error feedback, P and Q).
    std::int64_t (*resident_bytes)(const HookContext& ctx, std::span<const BucketInfo> buckets) = nullptr;
    // Work after the optimizer step (post-local SGD's model averaging); returns the last task or `step`.
    std::int32_t (*after_step)(HookContext& ctx, std::int32_t step) = nullptr;
    // Phases the hook adds to DDP's (PowerSGD's warm-up, post-local SGD's averaging step).
    std::vector<StepPhase> (*phases)(const Config& config, const Knobs& knobs) = nullptr;
    // What the executor is told of it (Plan::hook): its kind, and the hook's settings.
    HookKind kind = HookKind::other;
    void (*describe)(const Knobs& knobs, CommHookSpec& spec) = nullptr;
};

// All hooks, registered explicitly in comm_hooks.cpp; "allreduce" is the default.
const Registry<CommHook>& comm_hooks();

// The default: one SUM allreduce of the bucket (allreduce_hook, §2.1).
std::int32_t allreduce_bucket(HookContext& ctx, const BucketInfo& bucket, std::int32_t ready);

// Registration, one line per hook unit.
void register_allreduce_hook(Registry<CommHook>& r);
void register_compress_hooks(Registry<CommHook>& r);       // fp16/bf16 compress hooks
void register_powersgd_hooks(Registry<CommHook>& r);       // powerSGD, batched_powerSGD
void register_post_local_sgd_hook(Registry<CommHook>& r);  // post_localSGD

}  // namespace dtsim::sim
