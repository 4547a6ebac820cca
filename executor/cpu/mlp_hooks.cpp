// Train mode's DDP communication hooks (strategy-semantics.md §2) with real
// math on the real bucket gradients:
//  - fp16_compress / bf16_compress: the bucket is rounded to half precision
//    (IEEE fp16 or bf16, round to nearest even), divided by the world size in
//    half, allreduced and copied back. MPI has no half type: the allreduce sums
//    a float buffer holding the half-rounded values and rounds the sum back to
//    half, which is exactly NCCL's half sum on 2 ranks (convert both operands
//    to float, add, round once) and within (world - 1) / 2 half ulps of NCCL's
//    per-hop rounding on more.
//  - powerSGD: per gradient viewed as n x m (tensor.view(shape[0], -1)), at
//    the rank r the plan gives it (BucketInfo::ranks: the simulator's
//    _should_compress decides; r = 0 is allreduced uncompressed). P = M Q, allreduce P, orthogonalize P (Gram-Schmidt),
//    Q = M^T P, allreduce Q, divide by the world, M ~ P Q^T; error feedback and
//    warm start as powerSGD_hook. Iterations before start_powerSGD_iter (the
//    executor's step + 1 is the iteration) run the vanilla allreduce.
// The plan's collectives of each bucket carry the bytes: every buffer sent
// must equal its collective's bytes. Each part runs on the thread torch runs
// it on: fp16/bf16's gather and cast in the plan's cast pass (the autograd
// thread's hook body), the allreduce in the bucket's collective, the copy back
// in its decompress pass (the future's callback). PowerSGD's math runs in its
// collectives' tasks; its compression passes run nothing, so that no pass is
// both replayed and computed.
#include "cpu_backend.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/half.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace dtsim::executor::cpu {

HookDiagnostics& hook_diagnostics() {
    static HookDiagnostics d;
    return d;
}

namespace {

enum class Hook { fp16, bf16, powersgd };

std::uint64_t splitmix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// Standard normal (Box-Muller), a pure function of (seed, index): the same on every rank.
double normal(std::uint64_t seed, std::uint64_t index) {
    const std::uint64_t a = splitmix(seed ^ splitmix(2 * index)), b = splitmix(seed ^ splitmix(2 * index + 1));
    const double u1 = (static_cast<double>(a >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// _orthogonalize_gram_schmidt (epsilon 0) of a rows x cols row-major matrix,
// in double and applied twice ("twice is enough"): a rank-deficient P (a
// low-rank gradient at full matrix_approximation_rank) still comes out
// orthonormal; a column left with no independent direction (below 1e-12 of its
// norm) is zeroed instead of dividing by (nearly) zero.
void orthogonalize(std::vector<double>& a, std::int64_t rows, std::int64_t cols) {
    const auto at = [&](std::int64_t i, std::int64_t j) -> double& {
        return a[static_cast<std::size_t>(i * cols + j)];
    };
    const auto norm_of = [&](std::int64_t c) {
        double norm = 0;
        for (std::int64_t i = 0; i < rows; ++i) norm += at(i, c) * at(i, c);
        return std::sqrt(norm);
    };
    std::vector<double> before(static_cast<std::size_t>(cols));
    for (std::int64_t c = 0; c < cols; ++c) before[static_cast<std::size_t>(c)] = norm_of(c);
    for (int pass = 0; pass < 2; ++pass)
        for (std::int64_t c = 0; c < cols; ++c) {
            const double norm = norm_of(c);
            const bool keep = norm > 1e-12 * before[static_cast<std::size_t>(c)] && norm > 0;
            for (std::int64_t i = 0; i < rows; ++i) at(i, c) = keep ? at(i, c) / norm : 0.0;
            if (pass == 0) before[static_cast<std::size_t>(c)] = 1.0;
            for (std::int64_t k = c + 1; k < cols; ++k) {
                double dot = 0;
                for (std::int64_t i = 0; i < rows; ++i) dot += at(i, c) * at(i, k);
                for (std::int64_t i = 0; i < rows; ++i) at(i, k) -= dot * at(i, c);
            }
        }
}

void allreduce(std::vector<float>& v, runtime::Communicator& comm) {
    if (!v.empty()) comm.allreduce_sum(v.data(), static_cast<std::int64_t>(v.size()));
}

double frobenius(const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double d = double(a[i]) - (b.empty() ? 0.0 : double(b[i]));
        s += d * d;
    }
    return std::sqrt(s);
}

}  // namespace

struct MlpTrainer::HookState {
    struct Matrix {
        std::int64_t offset = 0, n = 0, m = 0, r = 0;  // offset: elements into the flat bucket
        std::vector<double> p, q;                      // n x r, m x r (row-major)
    };
    struct Bucket {
        std::vector<Matrix> matrices;
        std::vector<std::pair<std::int64_t, std::int64_t>> uncompressed;  // (offset, elements)
        std::int64_t elements = 0, u_elements = 0, p_elements = 0, q_elements = 0;
        int collectives = 0;  // the plan's per step
        std::int64_t iteration = 1;
        bool vanilla = false;     // this step runs the plain allreduce
        bool have_pq = false;     // warm start: P and Q kept from the last compressed step
        std::uint64_t draws = 0;  // random Q fills so far
        std::vector<float> flat, input_cp, error, raw, avg_in;
        std::vector<runtime::Half> half;  // fp16_compress: the bucket as sent
    };
    // The plan's compression passes, by task: the fp16/bf16 hook's cast (on
    // the compute stream, before the bucket's allreduce) and decompress (on
    // the callback stream, after it) run their real part there; PowerSGD's
    // run inside its collectives' tasks, so its passes run nothing.
    enum class Pass : std::uint8_t { none, cast, decompress, in_collective };
    Hook hook = Hook::fp16;
    std::int64_t start = 1000;
    bool error_feedback = true, warm_start = true;
    std::vector<Bucket> buckets;
    const std::vector<sim::BucketInfo>* infos = nullptr;  // the plan's (it outlives the trainer), by index
    std::vector<Pass> pass;                               // by plan task
    std::vector<int> pass_bucket;                         // by plan task: the bucket a cast or decompress is of
};

namespace {

// Which plan task is which of the hook's passes (HookState::pass). Only
// buckets that are reduced have passes to run.
void map_hook_passes(const sim::Plan& plan, MlpTrainer::HookState& s) {
    using Pass = MlpTrainer::HookState::Pass;
    const auto n = plan.tasks.size();
    s.pass.assign(n, Pass::none);
    s.pass_bucket.assign(n, -1);
    const auto compressed = [&](std::int32_t i) {
        const sim::Task& t = plan.tasks[static_cast<std::size_t>(i)];
        return t.kind == sim::TaskKind::collective && t.bucket >= 0 && t.role == sim::CollectiveRole::compressed;
    };
    for (std::size_t i = 0; i < n; ++i) {
        const sim::Task& t = plan.tasks[i];
        if (t.kind != sim::TaskKind::compute || t.phase != sim::Phase::compression) continue;
        if (s.hook == Hook::powersgd) {
            s.pass[i] = Pass::in_collective;
            continue;
        }
        for (std::int32_t d : plan.deps_of(t))
            if (compressed(d)) {  // after the allreduce: decompress
                s.pass[i] = Pass::decompress;
                s.pass_bucket[i] = plan.tasks[static_cast<std::size_t>(d)].bucket;
            }
    }
    if (s.hook == Hook::powersgd) return;
    for (std::size_t i = 0; i < n; ++i)
        if (compressed(static_cast<std::int32_t>(i)))
            for (std::int32_t d : plan.deps_of(plan.tasks[i]))
                if (plan.tasks[static_cast<std::size_t>(d)].phase == sim::Phase::compression) {  // before it: cast
                    s.pass[static_cast<std::size_t>(d)] = Pass::cast;
                    s.pass_bucket[static_cast<std::size_t>(d)] = plan.tasks[i].bucket;
                }
    std::vector<int> casts(s.buckets.size(), 0), decompressions(s.buckets.size(), 0);
    for (std::size_t i = 0; i < n; ++i) {
        if (s.pass[i] == Pass::cast) ++casts[static_cast<std::size_t>(s.pass_bucket[i])];
        if (s.pass[i] == Pass::decompress) ++decompressions[static_cast<std::size_t>(s.pass_bucket[i])];
    }
    for (std::size_t b = 0; b < s.buckets.size(); ++b)
        DTSIM_ASSERT(s.buckets[b].collectives == 0 || (casts[b] == 1 && decompressions[b] == 1),
                     "a compressed bucket has one cast before its allreduce and one decompress after it");
}

}  // namespace

void MlpTrainer::enable_comm_hook(const sim::Plan& plan, const models::Workload& w, int steps) {
    const sim::CommHookSpec& spec = plan.hook;
    if (spec.kind == sim::HookKind::none) return;
    auto s = std::make_shared<HookState>();
    if (spec.kind == sim::HookKind::compress) {
        // fp16 or bf16: the type the plan's compressed allreduces carry, not the hook's name.
        s->hook = Hook::fp16;
        for (const auto& t : plan.tasks)
            if (t.role == sim::CollectiveRole::compressed) s->hook = t.dtype == DType::bf16 ? Hook::bf16 : Hook::fp16;
    } else if (spec.kind == sim::HookKind::powersgd) {
        s->hook = Hook::powersgd;
    } else
        throw ConfigError(fmt::format(
            "train mode runs comm_hook=allreduce, fp16_compress, bf16_compress and powerSGD, not comm_hook={}; "
            "use --mode replay.",
            spec.name));
    if (s->hook == Hook::powersgd) {
        if (!spec.wrapper.empty())
            throw ConfigError(
                fmt::format("train mode runs powerSGD without comm_wrapper={}; use --mode replay.", spec.wrapper));
        s->start = spec.start_iter;
        s->error_feedback = spec.error_feedback;
        s->warm_start = spec.warm_start;
        if (spec.orthogonalization_epsilon != 0)
            throw ConfigError("train mode runs powerSGD with orthogonalization_epsilon=0 only; use --mode replay.");
    }
    std::vector<const models::Parameter*> params(params_.size(), nullptr);
    for (const auto& l : w.layers)
        for (const auto& p : l.params) params[static_cast<std::size_t>(p.index)] = &p;
    s->buckets.resize(plan.buckets.size());
    for (const auto& b : plan.buckets) {
        auto& hb = s->buckets[static_cast<std::size_t>(b.index)];
        DTSIM_ASSERT(b.ranks.empty() || b.ranks.size() == b.params.size(), "a rank per bucket tensor");
        for (std::size_t i = 0; i < b.params.size(); ++i) {
            const models::Parameter& p = *params[static_cast<std::size_t>(b.params[i])];
            const std::int64_t numel = p.numel();
            // PowerSGD's view of the gradient (tensor.view(shape[0], -1)), at the rank the plan compresses it to.
            const std::int64_t n = p.shape.empty() ? 1 : p.shape.front();
            const std::int64_t m = n > 0 ? numel / n : 0;
            const std::int64_t r = s->hook == Hook::powersgd && !b.ranks.empty() ? b.ranks[i] : 0;
            if (r > 0) {
                hb.matrices.push_back({hb.elements, n, m, r, {}, {}});
                hb.p_elements += n * r;
                hb.q_elements += m * r;
            } else {
                hb.uncompressed.emplace_back(hb.elements, numel);
                hb.u_elements += numel;
            }
            hb.elements += numel;
        }
    }
    for (const auto& t : plan.tasks)
        if (t.kind == sim::TaskKind::collective && t.bucket >= 0)
            ++s->buckets[static_cast<std::size_t>(t.bucket)].collectives;
    for (const auto& hb : s->buckets) {
        const int expect = s->hook == Hook::powersgd ? 3 : 1;
        if (hb.collectives == 0) continue;  // one rank: nothing is reduced
        // A plan priced before start_powerSGD_iter has one allreduce per bucket:
        // it cannot carry the compressed steps that follow.
        if (s->hook == Hook::powersgd && hb.collectives == 1 && steps > s->start)
            throw ConfigError(fmt::format(
                "the plan was built for a PowerSGD warm-up iteration (one allreduce per bucket) but {} steps reach "
                "start_powerSGD_iter={}; build it for the steady state (the default --iteration) or run fewer steps.",
                steps, s->start));
        DTSIM_ASSERT(hb.collectives == expect || (s->hook == Hook::powersgd && hb.collectives == 1),
                     "the hook's collectives per bucket");
    }
    s->infos = &plan.buckets;
    map_hook_passes(plan, *s);
    hook_ = std::move(s);
}

// The bucket's gradients, concatenated into its flat buffer.
void MlpTrainer::hook_gather(const sim::BucketInfo& bucket) {
    auto& b = hook_->buckets[static_cast<std::size_t>(bucket.index)];
    b.flat.clear();
    for (int p : bucket.params) {
        const auto& g = grads_[static_cast<std::size_t>(p)];
        b.flat.insert(b.flat.end(), g.begin(), g.end());
    }
    DTSIM_ASSERT(static_cast<std::int64_t>(b.flat.size()) == b.elements, "the bucket's elements");
    if (hook_diagnostics().enabled) b.raw = b.flat;
}

// Diagnostics only (not part of the plan): the exact average of the gathered bucket.
void MlpTrainer::exact_average(int bucket, runtime::Communicator& comm) {
    auto& b = hook_->buckets[static_cast<std::size_t>(bucket)];
    if (!hook_diagnostics().enabled || b.raw.empty()) return;
    allreduce(b.raw, comm);
    for (auto& v : b.raw) v /= static_cast<float>(comm.size());
}

// The hook's result becomes the bucket's reduced gradient.
void MlpTrainer::hook_finish(const sim::BucketInfo& bucket, bool keep) {
    auto& b = hook_->buckets[static_cast<std::size_t>(bucket.index)];
    auto& diag = hook_diagnostics();
    if (diag.enabled && !b.raw.empty()) {
        const double norm = frobenius(b.raw, {});
        diag.relative_error.push_back(norm > 0 ? frobenius(b.flat, b.raw) / norm : 0.0);
    }
    if (diag.enabled && !b.avg_in.empty()) {
        const double norm = frobenius(b.avg_in, {});
        diag.compression_error.push_back(norm > 0 ? frobenius(b.flat, b.avg_in) / norm : 0.0);
        b.avg_in.clear();
    }
    // torch's future returns the bucket's own buffer: swapped in, not copied.
    // `flat` is refilled by the bucket's next gather and not read before it.
    bucket_data_[static_cast<std::size_t>(bucket.index)].swap(b.flat);
    ++b.iteration;
    if (!keep) view_buckets(bucket);
}

bool MlpTrainer::run_hook_pass(int task, bool keep) {
    if (!hook_ || static_cast<std::size_t>(task) >= hook_->pass.size()) return false;
    HookState& s = *hook_;
    const auto pass = s.pass[static_cast<std::size_t>(task)];
    if (pass == HookState::Pass::none) return false;
    if (pass == HookState::Pass::in_collective) return true;
    const sim::BucketInfo& bucket = (*s.infos)[static_cast<std::size_t>(s.pass_bucket[static_cast<std::size_t>(task)])];
    auto& b = s.buckets[static_cast<std::size_t>(bucket.index)];
    const auto world = static_cast<float>(world_);
    if (pass == HookState::Pass::cast) {
        // The hook body, on the autograd thread: buffer.to(half).div_(world).
        hook_gather(bucket);
        if (s.hook == Hook::fp16) {  // torch's two passes (common/half.hpp)
            b.half.resize(b.flat.size());
            fp16_compress(b.flat.data(), b.half.data(), b.flat.size(), world);
        } else {  // both round to bf16
            for (auto& v : b.flat) v = round_to_bf16(round_to_bf16(v) / world);
        }
        return true;
    }
    // The future's decompress callback: into the fp32 bucket (bf16's values are already there).
    if (s.hook == Hook::fp16) fp16_to_float(b.half.data(), b.flat.data(), b.flat.size());
    hook_finish(bucket, keep);
    return true;
}

void MlpTrainer::reduce_bucket_task(const sim::Task& t, const sim::BucketInfo& bucket, runtime::Communicator& comm,
                                    bool keep, runtime::Completion c) {
    if (!hook_) return reduce_bucket(bucket, comm, keep, std::move(c));
    HookState& s = *hook_;
    auto& b = s.buckets[static_cast<std::size_t>(bucket.index)];
    if (s.hook == Hook::powersgd)  // its math between its collectives: here, before returning
        return runtime::run_completing(c, [&] { powersgd_task(t, bucket, comm, keep); });
    // The plan's cast pass gathered and compressed the bucket (run_hook_pass);
    // its decompress pass finishes it.
    DTSIM_ASSERT(comm.size() == world_, "the bucket's group is every rank");
    DTSIM_ASSERT(t.bytes == b.elements * 2, "the allreduce moves the half-precision bucket");
    exact_average(bucket.index, comm);
    if (s.hook == Hook::fp16)
        return comm.allreduce_sum_async(b.half.data(), static_cast<std::int64_t>(b.half.size()), std::move(c));
    // bf16: a float sum of bf16 values, rounded back to bf16.
    comm.allreduce_sum_async(b.flat.data(), static_cast<std::int64_t>(b.flat.size()),
                             {std::move(c.started), [&flat = b.flat, done = std::move(c.done)](std::exception_ptr e) {
                                  if (!e)
                                      for (auto& v : flat) v = round_to_bf16(v);
                                  if (done) done(e);
                              }});
}

// PowerSGD's part of a bucket's reduction that its collective `t` carries.
void MlpTrainer::powersgd_task(const sim::Task& t, const sim::BucketInfo& bucket, runtime::Communicator& comm,
                               bool keep) {
    HookState& s = *hook_;
    auto& b = s.buckets[static_cast<std::size_t>(bucket.index)];
    auto& diag = hook_diagnostics();
    const int world = comm.size();
    DTSIM_ASSERT(world == world_, "the bucket's group is every rank");
    // Which of the hook's collectives of the bucket `t` is, by the role the plan gives it.
    const int pos = t.role == sim::CollectiveRole::powersgd_p ? 1 : t.role == sim::CollectiveRole::powersgd_q ? 2 : 0;
    const bool last = pos == b.collectives - 1;
    auto& flat = b.flat;
    const auto gather = [&] {
        hook_gather(bucket);
        exact_average(bucket.index, comm);
    };
    const auto finish = [&] { hook_finish(bucket, keep); };

    if (pos == 0) {
        gather();
        b.vanilla = b.iteration - 1 < s.start;
        if (b.vanilla) {  // _allreduce_fut: divide first, one allreduce of the whole bucket
            if (b.collectives == 1) DTSIM_ASSERT(t.bytes == b.elements * 4, "the warm-up allreduce moves the bucket");
            for (auto& v : flat) v /= static_cast<float>(world);
            allreduce(flat, comm);
            if (b.collectives == 1) return finish();
            // A plan priced for compressed steps: its other two collectives move
            // nothing this step, and the last of them finishes the bucket.
            return;
        }
        if (s.error_feedback) {
            if (b.error.empty()) b.error.assign(flat.size(), 0.0f);
            for (std::size_t i = 0; i < flat.size(); ++i) flat[i] += b.error[i];
            b.input_cp = flat;
        }
        if (diag.enabled) {  // the averaged input the compressor sees (g + e)
            b.avg_in = flat;
            allreduce(b.avg_in, comm);
            for (auto& v : b.avg_in) v /= static_cast<float>(world);
        }
        // The uncompressed tensors, concatenated.
        std::vector<float> u;
        u.reserve(static_cast<std::size_t>(b.u_elements));
        for (const auto& [off, len] : b.uncompressed) u.insert(u.end(), flat.begin() + off, flat.begin() + off + len);
        // Qs: a fresh seeded normal fill (same on every rank) unless warm start keeps them; orthogonalized.
        const bool fresh = !s.warm_start || !b.have_pq;
        for (auto& x : b.matrices) {
            if (fresh) {
                x.q.resize(static_cast<std::size_t>(x.m * x.r));
                const std::uint64_t seed = splitmix(splitmix(static_cast<std::uint64_t>(bucket.index)) ^ b.draws);
                for (std::size_t i = 0; i < x.q.size(); ++i) x.q[i] = normal(seed, i);
                ++b.draws;
            }
            orthogonalize(x.q, x.m, x.r);
            // P = M Q
            x.p.assign(static_cast<std::size_t>(x.n * x.r), 0.0);
            for (std::int64_t i = 0; i < x.n; ++i)
                for (std::int64_t j = 0; j < x.m; ++j) {
                    const double mij = flat[static_cast<std::size_t>(x.offset + i * x.m + j)];
                    for (std::int64_t c = 0; c < x.r; ++c)
                        x.p[static_cast<std::size_t>(i * x.r + c)] += mij * x.q[static_cast<std::size_t>(j * x.r + c)];
                }
        }
        b.have_pq = true;
        DTSIM_ASSERT(t.bytes == b.u_elements * 4, "allreduce #1 moves the uncompressed tensors");
        allreduce(u, comm);
        std::size_t k = 0;
        for (const auto& [off, len] : b.uncompressed)
            for (std::int64_t i = 0; i < len; ++i) flat[static_cast<std::size_t>(off + i)] = u[k++] / float(world);
        return;
    }
    if (b.vanilla) {
        if (last) finish();
        return;
    }
    if (pos == 1) {  // allreduce #2: every P (not divided)
        DTSIM_ASSERT(t.bytes == b.p_elements * 4, "allreduce #2 moves the Ps");
        std::vector<float> p;
        p.reserve(static_cast<std::size_t>(b.p_elements));
        for (const auto& x : b.matrices)
            for (double v : x.p) p.push_back(static_cast<float>(v));
        allreduce(p, comm);
        std::size_t k = 0;
        for (auto& x : b.matrices)
            for (auto& v : x.p) v = p[k++];
        return;
    }
    // Orthogonalize each P; Q = M^T P; allreduce #3 of every Q, divided by the world; M = P Q^T.
    DTSIM_ASSERT(t.bytes == b.q_elements * 4, "allreduce #3 moves the Qs");
    std::vector<float> q;
    q.reserve(static_cast<std::size_t>(b.q_elements));
    for (auto& x : b.matrices) {
        orthogonalize(x.p, x.n, x.r);
        std::fill(x.q.begin(), x.q.end(), 0.0);
        for (std::int64_t i = 0; i < x.n; ++i)
            for (std::int64_t j = 0; j < x.m; ++j) {
                const double mij = flat[static_cast<std::size_t>(x.offset + i * x.m + j)];
                for (std::int64_t c = 0; c < x.r; ++c)
                    x.q[static_cast<std::size_t>(j * x.r + c)] += mij * x.p[static_cast<std::size_t>(i * x.r + c)];
            }
        for (double v : x.q) q.push_back(static_cast<float>(v));
    }
    allreduce(q, comm);
    std::size_t k = 0;
    for (auto& x : b.matrices) {
        for (auto& v : x.q) v = double(q[k++]) / world;
        for (std::int64_t i = 0; i < x.n; ++i)
            for (std::int64_t j = 0; j < x.m; ++j) {
                double sum = 0;
                for (std::int64_t c = 0; c < x.r; ++c)
                    sum += x.p[static_cast<std::size_t>(i * x.r + c)] * x.q[static_cast<std::size_t>(j * x.r + c)];
                flat[static_cast<std::size_t>(x.offset + i * x.m + j)] = static_cast<float>(sum);
            }
    }
    if (s.error_feedback)
        for (std::size_t i = 0; i < flat.size(); ++i) b.error[i] = b.input_cp[i] - flat[i];
    if (!s.warm_start) b.have_pq = false;
    finish();
}

}  // namespace dtsim::executor::cpu
