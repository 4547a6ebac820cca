// PowerSGD (strategy-semantics.md §2.2) and batched PowerSGD (§2.3): low-rank
// gradient compression with error feedback. Per bucket, three (batched: two)
// sequential allreduces with the compression math between them on the compute
// stream, ending in a full device synchronisation.
//
// Counting: PowerSGDState.iter is 0 in the first iteration and grows by one
// per iteration (on the last bucket), so Config::iteration i (1-based) runs
// with iter = i - 1, and the hook allreduces without compression while
// i - 1 < start_powerSGD_iter.
#include "dtsim/common/error.hpp"
#include "dtsim/sim/comm_hook.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace dtsim::sim {
namespace {

constexpr std::int64_t kFp32 = 4, kHalf = 2;

struct Settings {
    std::int64_t rank = 1;
    std::int64_t start = 1000;
    double min_compression_rate = 2;
    bool error_feedback = true;
    bool warm_start = true;
    // fp16/bf16_compress_wrapper: PowerSGD runs on a half-precision copy of the
    // bucket, so its buffers, state and wire bytes are 2 B per element.
    bool wrapped = false;
    std::int64_t element_bytes = kFp32;
};

std::int64_t whole_number(const Knobs& knobs, const char* name) {
    const double x = knobs.number(name);
    if (x != std::floor(x)) throw ConfigError(fmt::format("--set {}={}: expected a whole number", name, x));
    return static_cast<std::int64_t>(x);
}

// Reads and checks the knobs (PowerSGDState.__init__).
Settings settings(const Knobs& knobs) {
    Settings s;
    s.rank = whole_number(knobs, "matrix_approximation_rank");
    s.start = whole_number(knobs, "start_powerSGD_iter");
    s.min_compression_rate = knobs.number("min_compression_rate");
    s.error_feedback = knobs.boolean("use_error_feedback");
    s.warm_start = knobs.boolean("warm_start");
    s.wrapped = knobs.text("comm_wrapper") != "none";
    s.element_bytes = s.wrapped ? kHalf : kFp32;
    if ((s.error_feedback || s.warm_start) && s.start <= 1)
        throw ConfigError(fmt::format(
            "--set start_powerSGD_iter={}: must be > 1 when use_error_feedback or warm_start is on, because "
            "PowerSGD can only be applied after the first two iterations in DDP (buckets are rebuilt after "
            "iteration 1)",
            s.start));
    return s;
}

bool warming_up(const Settings& s, std::int64_t iteration) {
    return iteration - 1 < s.start;
}

// A gradient viewed as an n x m matrix, compressed at rank r.
struct Matrix {
    std::int64_t n = 0, m = 0, r = 0;
};

// How powerSGD_hook splits a bucket (_should_compress).
struct Split {
    std::vector<Matrix> compressed;
    std::int64_t uncompressed = 0;  // elements
    std::int64_t p_elements = 0, q_elements = 0;
    std::vector<std::int64_t> ranks;  // by position in the bucket: r, or 0 (uncompressed)
};

Split split_bucket(const HookContext& ctx, const BucketInfo& bucket, const Settings& s) {
    Split out;
    for (int index : bucket.params) {
        const models::Parameter& p = *ctx.params[static_cast<std::size_t>(index)];
        const std::int64_t numel = p.numel();
        // tensor.view(shape[0], -1): a 1-D tensor is n x 1 and never passes the test.
        const std::int64_t n = p.shape.empty() ? 1 : p.shape.front();
        const std::int64_t m = n > 0 ? numel / n : 0;
        const std::int64_t r = std::min({n, m, s.rank});
        if (static_cast<double>((n + m) * r) * s.min_compression_rate < static_cast<double>(n * m)) {
            out.compressed.push_back({n, m, r});
            out.p_elements += n * r;
            out.q_elements += m * r;
            out.ranks.push_back(r);
        } else {
            out.uncompressed += numel;
            out.ranks.push_back(0);
        }
    }
    return out;
}

// Emits the hook's kernels in order on the compute stream. The first kernel
// after wait(t) also waits for task t (the bucket being ready, an allreduce);
// an allreduce waits for the last kernel, or for t when none came after it.
struct Kernels {
    HookContext& ctx;
    std::int32_t last = -1;
    std::int32_t pending = -1;

    void wait(std::int32_t task) { pending = task; }
    std::int32_t pass(std::int64_t bytes, double flops = 0) {
        const std::int32_t deps[] = {pending};
        last = ctx.step.pass(Phase::compression, bytes, flops, deps, ctx.micro_step);
        pending = -1;
        return last;
    }
    // A matmul priced as its memory traffic (thin at PowerSGD's ranks).
    void matmul(std::int64_t rows, std::int64_t inner, std::int64_t cols, std::int64_t element_bytes) {
        pass((rows * inner + inner * cols + rows * cols) * element_bytes,
             2.0 * static_cast<double>(rows) * static_cast<double>(inner) * static_cast<double>(cols));
    }
    // _orthogonalize (Gram-Schmidt) of a rows x cols matrix: per column a norm
    // and a division, then a projection off the remaining columns. Sequential
    // small kernels, so launch-bound: one pass (one kernel overhead) per column.
    void orthogonalize(std::int64_t rows, std::int64_t cols, std::int64_t element_bytes) {
        for (std::int64_t i = 0; i < cols; ++i) {
            const std::int64_t touched = (3 + 4 * (cols - i - 1)) * rows;
            pass(touched * element_bytes, static_cast<double>(touched));
        }
    }
    std::int32_t allreduce(std::int64_t bytes, int bucket, CollectiveRole role = CollectiveRole::other) {
        const std::int32_t deps[] = {pending >= 0 ? pending : last};
        const std::int32_t id =
            ctx.step.collective(CollectiveKind::allreduce, bytes, ctx.group, ctx.stream, deps, ctx.micro_step, bucket);
        ctx.step.plan().set_role(role);
        wait(id);
        return id;
    }
};

// fp16/bf16_compress_wrapper: cast the bucket before the inner hook (read 4 B,
// write 2 B per element) into a new half-size buffer.
std::int32_t wrap(HookContext& ctx, const BucketInfo& bucket, std::int32_t ready) {
    const std::int64_t elements = bucket.bytes / kFp32;
    const std::int32_t deps[] = {ready};
    const std::int32_t cast = ctx.step.pass(Phase::compression, elements * (kFp32 + kHalf),
                                            static_cast<double>(elements), deps, ctx.micro_step);
    ctx.step.plan().alloc(MemCategory::other, elements * kHalf);
    return cast;
}

// The wrapper's decompress: copy the result back into the fp32 bucket. It is a
// future callback, on a pool stream rather than the compute stream.
std::int32_t unwrap(HookContext& ctx, const BucketInfo& bucket, std::int32_t done) {
    const std::int64_t elements = bucket.bytes / kFp32;
    const int callbacks = ctx.step.stream("comm_hook", TaskKind::compute);
    const std::int32_t deps[] = {done};
    const std::int32_t copy = ctx.step.pass(Phase::compression, elements * (kFp32 + kHalf),
                                            static_cast<double>(elements), deps, ctx.micro_step, callbacks);
    ctx.step.plan().release(MemCategory::other, elements * kHalf);
    return copy;
}

// Before start_powerSGD_iter: _allreduce_fut, which divides by the world size
// first (the Reducer does not divide when a hook is registered, §1.4).
std::int32_t vanilla(HookContext& ctx, const BucketInfo& bucket, std::int32_t ready, std::int64_t element_bytes) {
    const std::int64_t elements = bucket.bytes / kFp32;
    Kernels k{ctx};
    k.wait(ready);
    k.pass(2 * elements * element_bytes, static_cast<double>(elements));
    return k.allreduce(elements * element_bytes, bucket.index, CollectiveRole::bucket);
}

// What both PowerSGD hooks share: the optional fp16/bf16 wrapper around them
// and the vanilla allreduce before start_powerSGD_iter. `compress` emits the
// hook proper after `start` and returns its last task.
template <class Compress>
std::int32_t powersgd_frame(HookContext& ctx, const BucketInfo& bucket, std::int32_t ready, Compress compress) {
    const Settings s = settings(ctx.knobs);
    const std::int32_t start = s.wrapped ? wrap(ctx, bucket, ready) : ready;
    const std::int32_t done =
        warming_up(s, ctx.iteration) ? vanilla(ctx, bucket, start, s.element_bytes) : compress(s, start);
    return s.wrapped ? unwrap(ctx, bucket, done) : done;
}

std::int32_t compress_powersgd(HookContext& ctx, const BucketInfo& bucket, const Settings& s, std::int32_t start) {
    const std::int64_t e = s.element_bytes;
    Plan& plan = ctx.step.plan();
    const std::int64_t L = bucket.bytes / kFp32;  // elements
    const Split split = split_bucket(ctx, bucket, s);
    // The executor compresses what this split does (BucketInfo::ranks).
    plan.buckets[static_cast<std::size_t>(bucket.index)].ranks = split.ranks;
    const std::int64_t u_bytes = split.uncompressed * e;
    const std::int64_t pq_bytes = (split.p_elements + split.q_elements) * e;
    Kernels k{ctx};
    k.wait(start);
    // 1. Error feedback: input += error (read 2, write 1), then keep a clone.
    if (s.error_feedback) {
        k.pass(3 * L * e, static_cast<double>(L));
        k.pass(2 * L * e);
        plan.alloc(MemCategory::other, L * e);
    }
    // 3. torch.cat of the uncompressed tensors.
    if (split.uncompressed > 0) {
        k.pass(2 * u_bytes);
        plan.alloc(MemCategory::other, u_bytes);
    }
    // 4-5. Warm start re-orthogonalizes last step's Qs; otherwise P and Q are
    // new and each Q is filled from a CPU randn (approximated as a pass over Q).
    for (const Matrix& x : split.compressed) {
        if (!s.warm_start) k.pass(2 * x.m * x.r * e);
        k.orthogonalize(x.m, x.r, e);
    }
    if (!s.warm_start && pq_bytes > 0 && k.last >= 0) plan.alloc(MemCategory::other, pq_bytes);
    // 6. P_i = M_i Q_i.
    for (const Matrix& x : split.compressed) k.matmul(x.n, x.m, x.r, e);
    // 7. Allreduce #1 of the uncompressed tensors, launched after the code above.
    k.allreduce(u_bytes, bucket.index, CollectiveRole::uncompressed);
    // 8. Its callback divides by the world size and copies back into the
    // bucket, then launches allreduce #2 of all Ps (not divided).
    if (split.uncompressed > 0) k.pass(4 * u_bytes, static_cast<double>(split.uncompressed));
    k.allreduce(split.p_elements * e, bucket.index, CollectiveRole::powersgd_p);
    // 9-11. Orthogonalize each P; Q_i = M_i^T P_i; allreduce #3 of all Qs.
    for (const Matrix& x : split.compressed) k.orthogonalize(x.n, x.r, e);
    for (const Matrix& x : split.compressed) k.matmul(x.m, x.n, x.r, e);
    k.allreduce(split.q_elements * e, bucket.index, CollectiveRole::powersgd_q);
    // 12. Divide Q by the world size; M_i = P_i Q_i^T written into the bucket.
    k.pass(2 * split.q_elements * e, static_cast<double>(split.q_elements));
    for (const Matrix& x : split.compressed) k.matmul(x.n, x.r, x.m, e);
    // torch.cuda.synchronize(device) blocks the autograd thread until the
    // device is idle, so nothing later (the rest of backward, the next bucket's
    // compression) is enqueued before this bucket is done: every kernel here is
    // on the compute stream, in issue order, which gives exactly that wait.
    // 13. error = input_cp - input: a new L-element tensor replaces the old one.
    std::int64_t freed = u_bytes + (s.warm_start ? 0 : pq_bytes);
    if (s.error_feedback) {
        k.pass(3 * L * e, static_cast<double>(L));
        plan.alloc(MemCategory::other, L * e);
        freed += 2 * L * e;  // the clone and the previous error tensor
    }
    if (freed > 0) plan.release(MemCategory::other, freed);
    return k.last;
}

std::int32_t powersgd_reduce(HookContext& ctx, const BucketInfo& bucket, std::int32_t ready) {
    return powersgd_frame(ctx, bucket, ready, [&](const Settings& s, std::int32_t start) {
        return compress_powersgd(ctx, bucket, s, start);
    });
}

// batched_powerSGD_hook: the whole bucket as one s x s matrix, s = ceil(sqrt(L)).
std::int64_t side_length(std::int64_t elements) {
    auto s = static_cast<std::int64_t>(std::ceil(std::sqrt(static_cast<double>(elements))));
    while (s * s < elements) ++s;
    while (s > 0 && (s - 1) * (s - 1) >= elements) --s;
    return s;
}

std::int32_t compress_batched(HookContext& ctx, const BucketInfo& bucket, const Settings& s, std::int32_t start) {
    const std::int64_t e = s.element_bytes;
    Plan& plan = ctx.step.plan();
    const std::int64_t L = bucket.bytes / kFp32;
    const std::int64_t side = side_length(L);
    const std::int64_t padded = side * side;
    const std::int64_t r = s.rank;
    Kernels k{ctx};
    k.wait(start);
    // input.resize_(s^2) and zero the padding.
    if (padded > L) k.pass((padded - L) * e);
    std::int64_t freed = 0;
    if (s.error_feedback) {  // s^2 elements per bucket
        k.pass(3 * padded * e, static_cast<double>(padded));
        k.pass(2 * padded * e);
        plan.alloc(MemCategory::other, padded * e);
        freed += 2 * padded * e;
    }
    // Without warm start P and Q are new every step, Q from a CPU randn and
    // orthogonalized; with it last step's Q is reused as is.
    if (!s.warm_start) {
        k.pass(2 * side * r * e);
        plan.alloc(MemCategory::other, 2 * side * r * e);
        k.orthogonalize(side, r, e);
        freed += 2 * side * r * e;
    }
    k.matmul(side, side, r, e);  // P = M Q
    k.allreduce(side * r * e, bucket.index);
    k.orthogonalize(side, r, e);
    k.matmul(side, side, r, e);  // Q = M^T P
    k.allreduce(side * r * e, bucket.index);
    k.pass(2 * side * r * e, static_cast<double>(side * r));  // Q /= world
    k.matmul(side, r, side, e);                               // M = P Q^T
    if (s.error_feedback) {
        k.pass(3 * padded * e, static_cast<double>(padded));
        plan.alloc(MemCategory::other, padded * e);
    }
    // torch.cuda.synchronize(device), as in powerSGD_hook.
    if (freed > 0) plan.release(MemCategory::other, freed);
    return k.last;
}

std::int32_t batched_reduce(HookContext& ctx, const BucketInfo& bucket, std::int32_t ready) {
    return powersgd_frame(ctx, bucket, ready, [&](const Settings& s, std::int32_t start) {
        return compress_batched(ctx, bucket, s, start);
    });
}

// Error feedback (one tensor per bucket, in the hook's dtype) and, with warm
// start, the Ps and Qs kept across steps. None of it exists before the first
// compressing iteration.
std::int64_t powersgd_resident(const HookContext& ctx, std::span<const BucketInfo> buckets) {
    const Settings s = settings(ctx.knobs);
    if (warming_up(s, ctx.iteration)) return 0;
    std::int64_t elements = 0;
    for (const auto& b : buckets) {
        if (s.error_feedback) elements += b.bytes / kFp32;
        if (s.warm_start) {
            const Split split = split_bucket(ctx, b, s);
            elements += split.p_elements + split.q_elements;
        }
    }
    return elements * s.element_bytes;
}

std::int64_t batched_resident(const HookContext& ctx, std::span<const BucketInfo> buckets) {
    const Settings s = settings(ctx.knobs);
    if (warming_up(s, ctx.iteration)) return 0;
    std::int64_t elements = 0;
    for (const auto& b : buckets) {
        const std::int64_t side = side_length(b.bytes / kFp32);
        if (s.error_feedback) elements += side * side;
        if (s.warm_start) elements += 2 * side * s.rank;
    }
    return elements * s.element_bytes;
}

std::vector<StepPhase> powersgd_phases(const Config&, const Knobs& knobs) {
    const Settings s = settings(knobs);
    std::vector<StepPhase> phases{{"steady state (PowerSGD)", Config::kSteadyIteration, 1.0}};
    // Iteration 2 runs on rebuilt buckets and, for any start >= 2, uncompressed.
    if (warming_up(s, 2)) phases.push_back({"warm-up: vanilla allreduce until start_powerSGD_iter", 2, 0.0});
    return phases;
}

// PowerSGDState's settings, as the executor applies them.
void describe_powersgd(const Knobs& knobs, CommHookSpec& spec) {
    const Settings s = settings(knobs);
    spec.start_iter = s.start;
    spec.error_feedback = s.error_feedback;
    spec.warm_start = s.warm_start;
    spec.wrapper = s.wrapped ? knobs.text("comm_wrapper") : "";
    spec.orthogonalization_epsilon = knobs.number("orthogonalization_epsilon");
}

KnobSpec knob(const char* name, KnobType type, const char* default_value, const char* description, double min_value = 0,
              std::vector<std::string> choices = {}) {
    KnobSpec k;
    k.name = name;
    k.type = type;
    k.default_value = default_value;
    k.description = description;
    k.min_value = min_value;
    k.choices = std::move(choices);
    return k;
}

std::vector<KnobSpec> powersgd_knobs() {
    return {
        knob("matrix_approximation_rank", KnobType::number, "1", "rank r of the low-rank approximation", 1),
        knob("start_powerSGD_iter", KnobType::number, "1000",
             "iterations of vanilla allreduce before compressing (> 1 with error feedback or warm start)"),
        knob("min_compression_rate", KnobType::number, "2",
             "compress a gradient only if (n+m)*r*rate < n*m; 1-D tensors never"),
        knob("use_error_feedback", KnobType::boolean, "true",
             "keep the compression error per bucket and add it back next step (one gradient copy of memory)"),
        knob("warm_start", KnobType::boolean, "true", "keep P and Q across steps instead of a fresh random Q"),
        knob("orthogonalization_epsilon", KnobType::number, "0",
             "added to column norms in Gram-Schmidt (numerics only, no cost)"),
        knob("comm_wrapper", KnobType::choice, "none",
             "fp16_compress_wrapper/bf16_compress_wrapper around the hook: half the bytes for everything PowerSGD "
             "sends and keeps, plus the casts",
             0, {"none", "fp16", "bf16"}),
    };
}

}  // namespace

void register_powersgd_hooks(Registry<CommHook>& r) {
    CommHook h;
    h.knobs = powersgd_knobs();
    h.reduce = powersgd_reduce;
    h.resident_bytes = powersgd_resident;
    h.phases = powersgd_phases;
    h.kind = HookKind::powersgd;
    h.describe = describe_powersgd;
    r.add("powerSGD",
          "powerSGD_hook: rank-r compression of each matrix gradient, 3 sequential allreduces and a device sync per "
          "bucket",
          h);
    // batched_powerSGD reads the same knobs (DDP declares a shared knob once).
    CommHook b;
    b.knobs = powersgd_knobs();
    b.reduce = batched_reduce;
    b.resident_bytes = batched_resident;
    b.phases = powersgd_phases;
    r.add("batched_powerSGD",
          "batched_powerSGD_hook: each bucket as one square matrix, 2 allreduces of s*r elements per bucket", b);
}

}  // namespace dtsim::sim
