// The default DDP reduction: no hook, or allreduce_hook (strategy-semantics.md
// §1.3, §2.1): one SUM allreduce of the bucket's fp32 gradients.
#include "dtsim/sim/comm_hook.hpp"

namespace dtsim::sim {

std::int32_t allreduce_bucket(HookContext& ctx, const BucketInfo& bucket, std::int32_t ready) {
    const std::int32_t deps[] = {ready};
    const std::int32_t id = ctx.step.collective(CollectiveKind::allreduce, bucket.bytes, ctx.group, ctx.stream, deps,
                                                ctx.micro_step, bucket.index);
    ctx.step.plan().set_role(CollectiveRole::bucket);
    return id;
}

void register_allreduce_hook(Registry<CommHook>& r) {
    CommHook h;
    h.reduce = allreduce_bucket;
    h.kind = HookKind::none;
    r.add("allreduce", "no hook: one allreduce per bucket (the Reducer's default, also allreduce_hook)", h);
}

}  // namespace dtsim::sim
