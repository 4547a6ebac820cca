// fp16_compress_hook and bf16_compress_hook (strategy-semantics.md §2.1):
// `buffer.to(half).div_(world)` allocates a half-size temporary, which is
// allreduced (half the wire bytes) and copied back into the fp32 bucket by the
// future's `decompress` callback.
#include "dtsim/sim/comm_hook.hpp"

namespace dtsim::sim {
namespace {

constexpr std::int64_t kFp32 = 4, kHalf = 2;

template <DType half>
std::int32_t compress_reduce(HookContext& ctx, const BucketInfo& bucket, std::int32_t ready) {
    const std::int64_t elements = bucket.bytes / kFp32;
    const std::int64_t half_bytes = elements * kHalf;
    // The hook body runs in the autograd thread, on the compute stream: the
    // cast (read 4 B, write 2 B per element) and the in-place div_ (read and
    // write 2 B) of the new half-size temporary.
    const std::int32_t cast_deps[] = {ready};
    const std::int32_t cast = ctx.step.pass(Phase::compression, bucket.bytes + half_bytes + 2 * half_bytes,
                                            2.0 * static_cast<double>(elements), cast_deps, ctx.micro_step);
    ctx.step.plan().alloc(MemCategory::other, half_bytes);
    const std::int32_t ar_deps[] = {cast};
    const std::int32_t allreduce = ctx.step.collective(CollectiveKind::allreduce, half_bytes, ctx.group, ctx.stream,
                                                       ar_deps, ctx.micro_step, bucket.index, half);
    ctx.step.plan().set_role(CollectiveRole::compressed);
    // `decompress` copies the result back into the fp32 bucket (read 2 B, write
    // 4 B). A CUDA future runs its then() callback on a stream from the pool,
    // not the compute stream, so it does not hold up the rest of backward:
    // a side compute stream that waits for the allreduce only.
    const int callbacks = ctx.step.stream("comm_hook", TaskKind::compute);
    const std::int32_t decompress_deps[] = {allreduce};
    const std::int32_t decompress =
        ctx.step.pass(Phase::compression, half_bytes + bucket.bytes, static_cast<double>(elements), decompress_deps,
                      ctx.micro_step, callbacks);
    ctx.step.plan().release(MemCategory::other, half_bytes);
    return decompress;
}

}  // namespace

void register_compress_hooks(Registry<CommHook>& r) {
    CommHook fp16, bf16;
    fp16.reduce = compress_reduce<DType::fp16>;
    bf16.reduce = compress_reduce<DType::bf16>;
    fp16.kind = bf16.kind = HookKind::compress;
    r.add("fp16_compress", "fp16_compress_hook: cast each bucket to fp16, allreduce half the bytes, cast back", fp16);
    r.add("bf16_compress", "bf16_compress_hook: cast each bucket to bf16 (NCCL > 2.9.6), allreduce half the bytes",
          bf16);
}

}  // namespace dtsim::sim
