#include "dtsim/traces/trace_workload.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/format_bytes.hpp"
#include "kineto_args.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>

namespace dtsim::traces {
namespace {

using detail::first_input_type;
using detail::iequals;
using detail::input_dims;
using detail::profiler_step;
using detail::starts_with;

constexpr std::string_view kNodePrefix = "autograd::engine::evaluate_function: ";
constexpr std::string_view kAccumulateGrad = "torch::autograd::AccumulateGrad";
constexpr std::string_view kOptimizerStep = "Optimizer.step#";

std::int64_t product(const std::vector<std::int64_t>& dims, std::size_t from = 0, std::size_t to = SIZE_MAX) {
    std::int64_t n = 1;
    for (std::size_t i = from; i < std::min(to, dims.size()); ++i) n *= dims[i];
    return n;
}

DType dtype_of(std::string_view input_type) {
    if (input_type == "c10::Half" || input_type == "Half") return DType::fp16;
    if (input_type == "c10::BFloat16" || input_type == "BFloat16") return DType::bf16;
    return DType::fp32;
}

// "aten::linear" -> "linear".
std::string_view short_name(std::string_view name) {
    const auto colon = name.rfind("::");
    return colon == std::string_view::npos ? name : name.substr(colon + 2);
}

// A forward op as an Op: GEMM-like ops get their shape and flops from the
// Input Dims (for MFU and the report); every op is priced at measured_ns.
models::Op forward_op(std::string_view name, const std::vector<std::vector<std::int64_t>>& dims,
                      std::int64_t measured_ns) {
    models::Op op;
    op.name = std::string(name);
    op.measured_ns = std::max<std::int64_t>(measured_ns, 1);
    const auto dim = [&](std::size_t i) -> const std::vector<std::int64_t>& {
        static const std::vector<std::int64_t> none;
        return i < dims.size() ? dims[i] : none;
    };
    const std::string_view s = short_name(name);
    std::int64_t m = 0, n = 0, k = 0, batch = 1;
    if (s == "linear" && dim(0).size() >= 1 && dim(1).size() == 2) {  // x[..., k] . W[n, k]^T
        k = dim(0).back();
        m = product(dim(0), 0, dim(0).size() - 1);
        n = dim(1)[0];
    } else if ((s == "mm" || s == "addmm") && dim(s == "mm" ? 0 : 1).size() == 2 &&
               dim(s == "mm" ? 1 : 2).size() == 2) {
        const auto& a = dim(s == "mm" ? 0 : 1);
        const auto& b = dim(s == "mm" ? 1 : 2);
        m = a[0], k = a[1], n = b[1];
    } else if ((s == "bmm" || s == "matmul") && dim(0).size() >= 2 && dim(1).size() >= 2) {
        const auto& a = dim(0);
        const auto& b = dim(1);
        m = a[a.size() - 2], k = a.back(), n = b.back();
        batch = std::max(product(a, 0, a.size() - 2), product(b, 0, b.size() - 2));
    } else if (s == "scaled_dot_product_attention" && dim(0).size() == 4 && dim(1).size() == 4) {
        // q [B, H, L, E], k [B, H, S, E]: QK^T and AV, 2 * 2 * L * S * E per head.
        op.kind = models::OpKind::gemm;
        op.flops = 4.0 * static_cast<double>(product(dim(0), 0, 3)) * static_cast<double>(dim(1)[2]) *
                   static_cast<double>(dim(0)[3]);
        return op;
    }
    if (m > 0 && n > 0 && k > 0) {
        op.kind = models::OpKind::gemm;
        op.m = m, op.n = n, op.k = k, op.batch = batch;
        op.flops =
            2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(batch);
    }
    return op;
}

enum class Role : std::uint8_t { forward, node, accumulate, optimizer, other };

struct TopOp {
    std::int32_t span = 0;
    std::int32_t end = 0;  // one past its last descendant in model.spans
    Role role = Role::other;
    std::int64_t start_ns = 0;
    std::int64_t measured_ns = 0;
    std::int32_t forward = -1;  // nodes: index into the forward ops of the forward op they differentiate
};

struct Param {
    std::int32_t owner = 0;  // forward op index
    std::vector<std::int64_t> shape;
};

class Reader {
public:
    Reader(const TraceModel& m, const std::string& source, const TraceWorkloadOptions& o)
        : m_(m), source_(source), o_(o) {}

    TraceWorkload read() {
        find_step();
        collect_top_ops();
        assign_roles_and_times();
        map_nodes_to_forward();
        collect_params();
        build_layers();
        return std::move(out_);
    }

private:
    [[noreturn]] void fail(const std::string& field, const std::string& what) const {
        throw ParseError(source_, field, what);
    }

    // The rank's ProfilerStep#N spans on CPU threads; picks the asked or the median one.
    void find_step() {
        if (o_.rank < 0 || static_cast<std::size_t>(o_.rank) >= m_.ranks.size())
            fail("rank",
                 fmt::format("the trace holds {} rank(s); rank index {} is not one of them", m_.ranks.size(), o_.rank));
        const RankInfo& rank = m_.ranks[static_cast<std::size_t>(o_.rank)];
        if (rank.generator == "dtsim")
            fail("", "this is a dtsim trace: --from-trace reads torch.profiler traces (dtsim's own hold no torch ops)");
        struct Found {
            std::int64_t n;
            std::int32_t span;
        };
        std::vector<Found> steps;
        for (std::size_t t = 0; t < m_.tracks.size(); ++t) {
            const Track& track = m_.tracks[t];
            if (track.rank != o_.rank) continue;
            if (track.kind == TrackKind::gpu_stream) gpu_ = true;
            if (track.kind != TrackKind::cpu_thread) continue;
            for (std::int32_t i = m_.track_span_begin[t]; i < m_.track_span_begin[t + 1]; ++i)
                if (auto n = profiler_step(m_.str(m_.spans[static_cast<std::size_t>(i)].name)))
                    steps.push_back({*n, i});
        }
        if (steps.empty()) {
            whole_trace();
            return;
        }
        const Found* pick = nullptr;
        if (o_.step >= 0) {
            for (const Found& f : steps)
                if (f.n == o_.step) pick = &f;
            if (pick == nullptr) {
                std::vector<std::int64_t> have;
                for (const Found& f : steps) have.push_back(f.n);
                std::sort(have.begin(), have.end());
                fail("ProfilerStep#N",
                     fmt::format("there is no ProfilerStep#{} (the trace has {})", o_.step, fmt::join(have, ", ")));
            }
        } else {
            std::sort(steps.begin(), steps.end(), [&](const Found& a, const Found& b) {
                const auto da = span(a.span).dur_ns, db = span(b.span).dur_ns;
                return da != db ? da < db : a.n < b.n;
            });
            pick = &steps[(steps.size() - 1) / 2];
        }
        const Span& step = span(pick->span);
        main_track_ = step.track;
        window_begin_ = step.start_ns;
        window_end_ = step.start_ns + step.dur_ns;
        out_.step = pick->n;
        out_.step_ns = step.dur_ns;
        if (steps.size() > 1 && o_.step < 0)
            out_.notes.push_back(
                fmt::format("ProfilerStep#{} is the median of the {} profiled steps by duration; "
                            "--trace-step picks another",
                            pick->n, steps.size()));
    }

    // No ProfilerStep#N: the whole trace is one step, on the CPU thread that
    // runs the most top-level ops outside the backward pass (not autograd's
    // own thread, which runs the backward on GPUs).
    void whole_trace() {
        std::int64_t best = -1;
        window_begin_ = INT64_MAX;
        window_end_ = INT64_MIN;
        for (std::size_t t = 0; t < m_.tracks.size(); ++t) {
            if (m_.tracks[t].rank != o_.rank || m_.tracks[t].kind != TrackKind::cpu_thread) continue;
            std::int64_t ops = 0;  // top-level cpu_ops that are not autograd nodes
            std::int64_t covered_until = INT64_MIN;
            for (std::int32_t i = m_.track_span_begin[t]; i < m_.track_span_begin[t + 1]; ++i) {
                const Span& s = span(i);
                window_begin_ = std::min(window_begin_, s.start_ns);
                window_end_ = std::max(window_end_, s.start_ns + s.dur_ns);
                if (s.start_ns < covered_until || !iequals(m_.str(s.category), "cpu_op")) continue;
                covered_until = s.start_ns + s.dur_ns;
                ops += starts_with(m_.str(s.name), kNodePrefix) ? 0 : 1;
            }
            if (ops > best) best = ops, main_track_ = static_cast<std::int32_t>(t);
        }
        if (best <= 0)
            fail("ProfilerStep#N", "no ProfilerStep#N annotation and no cpu_op on a CPU thread: profile with "
                                   "torch.profiler.profile and call prof.step() after each training step");
        out_.step_ns = window_end_ - window_begin_;
        out_.notes.push_back("the trace has no ProfilerStep#N: the whole trace is read as one step (call "
                             "prof.step() after each step to pick one)");
    }

    const Span& span(std::int32_t i) const { return m_.spans[static_cast<std::size_t>(i)]; }
    std::string step_field() const { return out_.step >= 0 ? fmt::format("ProfilerStep#{}", out_.step) : "traceEvents"; }
    std::string_view name(std::int32_t i) const { return m_.str(span(i).name); }

    // Units of the step: cpu_ops not nested in another cpu_op, and the
    // Optimizer.* annotations. Other annotations (record_function blocks,
    // python_function frames) are looked through, so their ops count.
    void collect_top_ops() {
        add_top_ops(main_track_, false);
        // Autograd runs backward on its own thread when the model is on a GPU.
        for (std::size_t t = 0; t < m_.tracks.size(); ++t)
            if (static_cast<std::int32_t>(t) != main_track_ && m_.tracks[t].rank == o_.rank &&
                m_.tracks[t].kind == TrackKind::cpu_thread)
                add_top_ops(static_cast<std::int32_t>(t), true);
        std::stable_sort(tops_.begin(), tops_.end(),
                         [](const TopOp& a, const TopOp& b) { return a.start_ns < b.start_ns; });
    }

    // The units of one thread inside the window; `nodes_only`: its autograd nodes only.
    void add_top_ops(std::int32_t track, bool nodes_only) {
        const auto t = static_cast<std::size_t>(track);
        std::int64_t covered_until = INT64_MIN;
        TopOp* last = nullptr;
        for (std::int32_t i = m_.track_span_begin[t]; i < m_.track_span_begin[t + 1]; ++i) {
            const Span& s = span(i);
            if (s.start_ns < window_begin_) continue;
            if (s.start_ns >= window_end_) break;
            if (s.start_ns < covered_until) {  // nested in the last unit
                if (last != nullptr) last->end = i + 1;
                continue;
            }
            const std::string_view n = m_.str(s.name);
            if (profiler_step(n)) continue;
            const bool optimizer_annotation = starts_with(n, "Optimizer.");
            if (!optimizer_annotation && !iequals(m_.str(s.category), "cpu_op")) continue;
            covered_until = s.start_ns + s.dur_ns;
            last = nullptr;
            if (nodes_only && !starts_with(n, kNodePrefix)) continue;
            tops_.push_back(TopOp{.span = i, .end = i + 1, .role = Role::other, .start_ns = s.start_ns});
            last = &tops_.back();
        }
    }

    void assign_roles_and_times() {
        std::optional<std::size_t> first_node, optimizer;
        std::size_t forward_begin = 0;
        for (std::size_t i = 0; i < tops_.size(); ++i) {
            const std::string_view n = name(tops_[i].span);
            if (starts_with(n, kNodePrefix)) {
                tops_[i].role = n.substr(kNodePrefix.size()) == kAccumulateGrad ? Role::accumulate : Role::node;
                if (!first_node) first_node = i;
            } else if (first_node && !optimizer && starts_with(n, kOptimizerStep)) {
                optimizer = i;
                tops_[i].role = Role::optimizer;
            } else if (!first_node && starts_with(n, "Optimizer.zero_grad#")) {
                forward_begin = i + 1;  // what precedes the model: data, zero_grad
            } else if (span(tops_[i].span).kind == SpanKind::communication) {
                ++collectives_;
            }
        }
        if (!first_node)
            fail(step_field(),
                 "the step has no backward pass (no autograd::engine::evaluate_function ops on its thread): profile "
                 "whole training steps, loss.backward() included");
        if (forward_begin >= *first_node)
            fail(step_field(), "the step has no forward op before its backward pass");
        for (std::size_t i = forward_begin; i < *first_node; ++i)
            if (tops_[i].role == Role::other) {
                tops_[i].role = Role::forward;
                forward_.push_back(static_cast<std::int32_t>(i));
            }
        if (forward_.empty())
            fail(step_field(), "the step has no forward op before its backward pass");
        for (std::size_t i = *first_node; i < optimizer.value_or(tops_.size()); ++i)
            if (tops_[i].role == Role::node || tops_[i].role == Role::accumulate)
                nodes_.push_back(static_cast<std::int32_t>(i));
        out_.forward_ops = static_cast<std::int64_t>(forward_.size());
        out_.backward_nodes = static_cast<std::int64_t>(nodes_.size());
        if (gpu_) {
            gpu_times(optimizer);
        } else {
            cpu_times(first_node, optimizer);
            if (o_.unprofiled_step_ns > 0) take_off_profiler_cost(optimizer);
        }
        if (optimizer) {
            optimizer_name_ = name(tops_[*optimizer].span).substr(kOptimizerStep.size());
            optimizer_name_ = optimizer_name_.substr(0, optimizer_name_.find('.'));
        } else {
            out_.notes.push_back(
                "the step has no Optimizer.step# annotation: the optimizer is priced by the model");
        }
        if (collectives_ > 0)
            out_.notes.push_back(
                fmt::format("{} collective op(s) in the step were left out: profile the model without "
                            "a distributed wrapper, whose work dtsim adds itself",
                            collectives_));
    }

    // CPU: each unit runs until the next one of its phase starts (the host's
    // gaps between ops are part of the step); what precedes the forward is
    // charged to its first op, the tail after the backward to the optimizer.
    void cpu_times(std::optional<std::size_t> first_node, std::optional<std::size_t> optimizer) {
        const std::int64_t step_end = window_end_;
        const auto next_start = [&](std::size_t pos, const std::vector<std::int32_t>& list, std::int64_t end) {
            return pos + 1 < list.size() ? tops_[static_cast<std::size_t>(list[pos + 1])].start_ns : end;
        };
        const std::int64_t backward_start = tops_[*first_node].start_ns;
        const std::int64_t backward_end = optimizer ? tops_[*optimizer].start_ns : step_end;
        for (std::size_t p = 0; p < forward_.size(); ++p) {
            TopOp& t = tops_[static_cast<std::size_t>(forward_[p])];
            t.measured_ns = next_start(p, forward_, backward_start) - t.start_ns;
        }
        tops_[static_cast<std::size_t>(forward_.front())].measured_ns +=
            tops_[static_cast<std::size_t>(forward_.front())].start_ns - window_begin_;
        for (std::size_t p = 0; p < nodes_.size(); ++p) {
            TopOp& t = tops_[static_cast<std::size_t>(nodes_[p])];
            t.measured_ns = next_start(p, nodes_, backward_end) - t.start_ns;
        }
        out_.forward_ns = backward_start - window_begin_;
        out_.backward_ns = backward_end - backward_start;
        if (optimizer) out_.optimizer_ns = step_end - backward_end;  // else the tail is the last node's
    }

    // GPU: a unit's time is its kernels' (launched from its CPU ops, joined by
    // Kineto's ac2g flows): from its first kernel's start to the next unit's,
    // the GPU's idle gaps between them included; the last unit to its last
    // kernel's end. Collectives' kernels are left out; units without kernels
    // (views, the host's own work) take no GPU time.
    void gpu_times(std::optional<std::size_t> optimizer) {
        std::vector<std::pair<std::int32_t, std::int32_t>> launches;  // (CPU launch span, kernel span)
        for (const Flow& f : m_.flows) {
            if (f.from_span < 0 || f.to_span < 0) continue;
            const Span& k = span(f.to_span);
            if (m_.tracks[static_cast<std::size_t>(k.track)].kind != TrackKind::gpu_stream ||
                m_.tracks[static_cast<std::size_t>(k.track)].rank != o_.rank ||
                (k.kind != SpanKind::compute && k.kind != SpanKind::memory))
                continue;
            launches.emplace_back(f.from_span, f.to_span);
        }
        if (launches.empty())
            fail("ac2g", "this GPU trace has no flows from CPU launches to kernels (Kineto's ac2g), so no op can "
                         "be given its kernels' time");
        std::sort(launches.begin(), launches.end());
        struct Gpu {
            std::int32_t unit;
            std::int64_t first, last_end;
        };
        std::vector<std::int32_t> sequence = forward_;
        sequence.insert(sequence.end(), nodes_.begin(), nodes_.end());
        if (optimizer) sequence.push_back(static_cast<std::int32_t>(*optimizer));
        std::vector<Gpu> timed;
        for (std::int32_t u : sequence) {
            const TopOp& t = tops_[static_cast<std::size_t>(u)];
            Gpu g{u, INT64_MAX, INT64_MIN};
            auto it = std::lower_bound(launches.begin(), launches.end(), std::make_pair(t.span, INT32_MIN));
            for (; it != launches.end() && it->first < t.end; ++it) {
                const Span& k = span(it->second);
                g.first = std::min(g.first, k.start_ns);
                g.last_end = std::max(g.last_end, k.start_ns + k.dur_ns);
            }
            if (g.first != INT64_MAX) timed.push_back(g);
        }
        if (timed.empty()) fail("ac2g", "no kernel of this step was launched from its forward or backward ops");
        for (std::size_t i = 0; i < timed.size(); ++i) {
            const std::int64_t until = i + 1 < timed.size() ? timed[i + 1].first : timed[i].last_end;
            tops_[static_cast<std::size_t>(timed[i].unit)].measured_ns = std::max<std::int64_t>(0, until - timed[i].first);
        }
        for (std::int32_t u : forward_) out_.forward_ns += tops_[static_cast<std::size_t>(u)].measured_ns;
        for (std::int32_t u : nodes_) out_.backward_ns += tops_[static_cast<std::size_t>(u)].measured_ns;
        if (optimizer) out_.optimizer_ns = tops_[*optimizer].measured_ns;
        out_.step_ns = out_.forward_ns + out_.backward_ns + out_.optimizer_ns;
        out_.notes.push_back("a GPU trace: each op is priced at its kernels' time on the GPU, the idle gaps between "
                             "them included; the measured step is the GPU's, from the first kernel to the last");
        if (o_.unprofiled_step_ns > 0)
            out_.notes.push_back("--unprofiled-step-ms is ignored for a GPU trace: the profiler slows the CPU, not "
                                 "the kernels");
    }

    // The profiler's cost per recorded op, from the step's unprofiled time,
    // taken off the unit each op's time is charged to (the first forward op
    // for what precedes the forward, the optimizer for its tail).
    void take_off_profiler_cost(std::optional<std::size_t> optimizer) {
        std::vector<std::int64_t> ops(tops_.size(), 0);
        std::int64_t optimizer_ops = 0, total = 0;
        std::size_t target = static_cast<std::size_t>(forward_.front());
        for (std::size_t i = 0; i < tops_.size(); ++i) {
            const std::int64_t n = tops_[i].end - tops_[i].span;
            total += n;
            if (tops_[i].role == Role::forward || tops_[i].role == Role::node || tops_[i].role == Role::accumulate)
                target = i;
            if (optimizer && i >= *optimizer)
                optimizer_ops += n;
            else
                ops[target] += n;
        }
        const auto overhead = static_cast<double>(out_.step_ns - o_.unprofiled_step_ns);
        if (overhead <= 0 || total == 0) {
            out_.notes.push_back(
                fmt::format("the unprofiled step ({:.1f} ms) is not shorter than the profiled one: "
                            "no profiler cost is taken off",
                            static_cast<double>(o_.unprofiled_step_ns) / 1e6));
            return;
        }
        out_.profiler_ns_per_op = overhead / static_cast<double>(total);
        const auto off = [&](std::int64_t& ns, std::int64_t n) {
            ns = std::max<std::int64_t>(1, ns - std::llround(static_cast<double>(n) * out_.profiler_ns_per_op));
        };
        out_.forward_ns = out_.backward_ns = 0;
        for (std::int32_t i : forward_) {
            off(tops_[static_cast<std::size_t>(i)].measured_ns, ops[static_cast<std::size_t>(i)]);
            out_.forward_ns += tops_[static_cast<std::size_t>(i)].measured_ns;
        }
        for (std::int32_t i : nodes_) {
            off(tops_[static_cast<std::size_t>(i)].measured_ns, ops[static_cast<std::size_t>(i)]);
            out_.backward_ns += tops_[static_cast<std::size_t>(i)].measured_ns;
        }
        if (optimizer) off(out_.optimizer_ns, optimizer_ops);
        out_.notes.push_back(
            fmt::format("the profiler's own cost, {:.2f} us per recorded op ({} ops; the step "
                        "unprofiled takes {:.1f} ms), is taken off every op",
                        out_.profiler_ns_per_op / 1e3, total, static_cast<double>(o_.unprofiled_step_ns) / 1e6));
    }

    // The index into forward_ of the forward unit holding time `t`, or -1.
    std::int32_t forward_at(std::int64_t t) const {
        auto it = std::upper_bound(forward_.begin(), forward_.end(), t, [&](std::int64_t v, std::int32_t i) {
            return v < tops_[static_cast<std::size_t>(i)].start_ns;
        });
        if (it == forward_.begin()) return -1;
        --it;
        const Span& s = span(tops_[static_cast<std::size_t>(*it)].span);
        return t < s.start_ns + std::max<std::int64_t>(s.dur_ns, 1) ? static_cast<std::int32_t>(it - forward_.begin())
                                                                    : -1;
    }

    // autograd's fwdbwd flows join each op that recorded a backward node to
    // that node; the forward unit holding the op owns the node.
    void map_nodes_to_forward() {
        const StringId fwdbwd = m_.find("fwdbwd");
        std::vector<std::int64_t> node_starts;
        for (std::int32_t i : nodes_) node_starts.push_back(tops_[static_cast<std::size_t>(i)].start_ns);
        std::size_t mapped = 0;
        for (const Flow& f : m_.flows) {
            if (f.name != fwdbwd || fwdbwd == kNoString || f.from_span < 0 || f.to_span < 0) continue;
            const Span& from = span(f.from_span);
            const Span& to = span(f.to_span);
            if (m_.tracks[static_cast<std::size_t>(from.track)].rank != o_.rank) continue;
            const std::int32_t fwd = forward_at(from.start_ns);
            if (fwd < 0) continue;
            auto it = std::upper_bound(node_starts.begin(), node_starts.end(), to.start_ns);
            if (it == node_starts.begin()) continue;
            TopOp& node =
                tops_[static_cast<std::size_t>(nodes_[static_cast<std::size_t>(it - node_starts.begin() - 1)])];
            const Span& ns = span(node.span);
            if (to.start_ns >= ns.start_ns + std::max<std::int64_t>(ns.dur_ns, 1) || node.forward >= 0) continue;
            node.forward = fwd;
            ++mapped;
        }
        if (mapped == 0)
            out_.notes.push_back(
                "the trace has no fwdbwd flows joining forward ops to their backward nodes: the "
                "whole model is read as one layer (profile with torch 2.x)");
    }

    // Each AccumulateGrad node is one parameter; it belongs to the forward op
    // of the node that ran before it (autograd runs AccumulateGrad as soon as
    // its gradient is ready).
    void collect_params() {
        std::int32_t current = -1;
        bool dtype_set = false;
        for (std::int32_t i : nodes_) {
            TopOp& t = tops_[static_cast<std::size_t>(i)];
            if (t.role == Role::node) {
                if (t.forward >= 0)
                    current = t.forward;
                else
                    t.forward = current;
                continue;
            }
            t.forward = current;
            std::vector<std::int64_t> shape;
            for (std::int32_t d = t.span + 1; d < t.end && shape.empty(); ++d) {
                if (name(d) != kAccumulateGrad) continue;
                const auto dims = input_dims(m_.arg(span(d), "Input Dims"));
                if (!dims.empty()) shape = dims[0];
                if (!dtype_set) {
                    const std::string type = first_input_type(m_.arg(span(d), "Input type"));
                    if (!type.empty()) out_.param_dtype = dtype_of(type), dtype_set = true;
                }
            }
            if (shape.empty())
                fail("Input Dims", fmt::format("AccumulateGrad at {} us ({}) has no Input Dims: profile with "
                                               "record_shapes=True",
                                               static_cast<double>(t.start_ns) / 1e3, step_field()));
            params_.push_back(Param{.owner = current, .shape = std::move(shape)});
        }
        if (params_.empty())
            fail(step_field(),
                 "the backward pass accumulates no parameter gradient (no torch::autograd::AccumulateGrad node): "
                 "dtsim needs a model with trainable parameters");
        const auto last = static_cast<std::int32_t>(forward_.size()) - 1;
        for (Param& p : params_)
            if (p.owner < 0) p.owner = last;
        for (std::int32_t i : nodes_) {
            TopOp& t = tops_[static_cast<std::size_t>(i)];
            if (t.forward < 0) t.forward = last;
        }
    }

    // The position of each parameter's shape among its owner's inputs
    // (weight before bias, as model.parameters() lists them); unmatched
    // ones last. Matched in reverse backward order, the forward's order
    // within an op; each owner's Input Dims is parsed once.
    std::vector<std::size_t> input_positions() const {
        struct Inputs {
            std::vector<std::vector<std::int64_t>> dims;
            std::vector<bool> used;
        };
        std::map<std::int32_t, Inputs> owners;
        std::vector<std::size_t> position(params_.size(), SIZE_MAX);
        for (std::size_t i = params_.size(); i-- > 0;) {
            const Param& p = params_[i];
            auto [it, added] = owners.try_emplace(p.owner);
            Inputs& in = it->second;
            if (added) {
                const TopOp& owner = tops_[static_cast<std::size_t>(forward_[static_cast<std::size_t>(p.owner)])];
                in.dims = input_dims(m_.arg(span(owner.span), "Input Dims"));
                in.used.assign(in.dims.size(), false);
            }
            for (std::size_t d = 0; d < in.dims.size(); ++d)
                if (!in.used[d] && in.dims[d] == p.shape) {
                    in.used[d] = true;
                    position[i] = d;
                    break;
                }
        }
        return position;
    }

    void build_layers() {
        // Parameters in first-use order: by owning forward op, then by input
        // position, then (unmatched) in reverse backward order.
        {
            const std::vector<std::size_t> position = input_positions();
            std::vector<std::size_t> idx(params_.size());
            std::iota(idx.begin(), idx.end(), 0);
            std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
                if (params_[a].owner != params_[b].owner) return params_[a].owner < params_[b].owner;
                if (position[a] != position[b]) return position[a] < position[b];
                return a > b;
            });
            std::vector<Param> sorted;
            for (std::size_t i : idx) sorted.push_back(params_[i]);
            params_ = std::move(sorted);
        }
        // A layer starts at each forward op owning parameters; ops before the first join it.
        std::vector<std::int32_t> layer_of(forward_.size(), 0);
        std::vector<std::int32_t> starts;
        for (const Param& p : params_)
            if (starts.empty() || starts.back() != p.owner) starts.push_back(p.owner);
        for (std::size_t f = 0, l = 0; f < forward_.size(); ++f) {
            while (l + 1 < starts.size() && static_cast<std::int32_t>(f) >= starts[l + 1]) ++l;
            layer_of[f] = static_cast<std::int32_t>(l);
        }
        models::Workload& w = out_.workload;
        w.micro_batch = o_.micro_batch;
        w.seq_len = 1;
        w.activation_dtype = out_.param_dtype;
        w.profile = source_;
        w.layers.resize(starts.size());
        for (std::size_t l = 0; l < starts.size(); ++l)
            w.layers[l].name = fmt::format(
                "{}.{}", l,
                short_name(name(tops_[static_cast<std::size_t>(forward_[static_cast<std::size_t>(starts[l])])].span)));
        int index = 0;
        std::vector<int> per_layer(starts.size(), 0);
        for (const Param& p : params_) {
            const auto l = static_cast<std::size_t>(layer_of[static_cast<std::size_t>(p.owner)]);
            w.layers[l].params.push_back(
                models::Parameter{.name = fmt::format("{}.param{}", w.layers[l].name, per_layer[l]++),
                                  .shape = p.shape,
                                  .index = index++});
        }
        std::vector<double> forward_flops(forward_.size(), 0);
        for (std::size_t f = 0; f < forward_.size(); ++f) {
            const TopOp& t = tops_[static_cast<std::size_t>(forward_[f])];
            models::Op op = forward_op(name(t.span), input_dims(m_.arg(span(t.span), "Input Dims")), t.measured_ns);
            forward_flops[f] = op.flops;
            w.layers[static_cast<std::size_t>(layer_of[f])].forward.push_back(std::move(op));
        }
        // Backward nodes in execution order, each in its forward op's layer;
        // a forward op's backward flops (2x its own) go on its first node.
        for (std::int32_t i : nodes_) {
            const TopOp& t = tops_[static_cast<std::size_t>(i)];
            models::Op op;
            op.name = std::string(name(t.span).substr(kNodePrefix.size()));
            op.measured_ns = std::max<std::int64_t>(t.measured_ns, 1);
            auto& f = forward_flops[static_cast<std::size_t>(t.forward)];
            if (f > 0) {
                op.kind = models::OpKind::gemm;
                op.flops = 2 * f;
                f = 0;
            }
            w.layers[static_cast<std::size_t>(layer_of[static_cast<std::size_t>(t.forward)])].backward.push_back(
                std::move(op));
        }
        saved_activations(layer_of);
        const std::int64_t params = w.param_count();
        if (out_.optimizer_ns > 0) {
            std::string lower;
            for (char c : optimizer_name_)
                lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
            if (lower == "sgd" || lower == "adam" || lower == "adamw") {
                w.measured_optimizer = lower;
                w.measured_optimizer_ns_per_element =
                    static_cast<double>(out_.optimizer_ns) / static_cast<double>(params);
            } else {
                out_.notes.push_back(
                    fmt::format("the profile's optimizer, {}, is not one dtsim models: the step is "
                                "priced for --optimizer",
                                optimizer_name_));
            }
        }
        out_.notes.insert(
            out_.notes.begin(),
            fmt::format("read {} of rank {}: {} forward ops and {} backward nodes, {} parameter tensors "
                        "({:.2f} M parameters, {}) in {} layers; measured step {:.1f} ms: forward {:.1f}, backward "
                        "{:.1f}, optimizer {:.1f}{}",
                        out_.step >= 0 ? fmt::format("ProfilerStep#{}", out_.step) : std::string("the whole trace"),
                        m_.ranks[static_cast<std::size_t>(o_.rank)].rank, forward_.size(), nodes_.size(),
                        params_.size(), static_cast<double>(params) / 1e6, to_string(out_.param_dtype), w.layers.size(),
                        static_cast<double>(out_.step_ns) / 1e6, static_cast<double>(out_.forward_ns) / 1e6,
                        static_cast<double>(out_.backward_ns) / 1e6, static_cast<double>(out_.optimizer_ns) / 1e6,
                        out_.profiler_ns_per_op > 0 ? " once the profiler's cost is taken off" : ""));
    }

    // The bytes each layer's forward leaves allocated (Kineto's [memory]
    // Total Allocated after its last op less before its first): what it saves
    // for backward.
    void saved_activations(const std::vector<std::int32_t>& layer_of) {
        std::vector<std::pair<std::int64_t, double>> series;
        StringId memory = kNoString;
        for (const Counter& c : m_.counters) {
            if (c.rank != o_.rank || !starts_with(m_.str(c.name), "[memory] ")) continue;
            // The device the ops ran on: a GPU's series on a GPU trace.
            if (memory == kNoString || (gpu_ && !starts_with(m_.str(memory), "[memory] GPU") &&
                                        starts_with(m_.str(c.name), "[memory] GPU"))) {
                memory = c.name;
                series.clear();
            }
            if (c.name == memory) series.emplace_back(c.time_ns, c.value);
        }
        if (series.empty()) {
            out_.notes.push_back(
                "the trace has no [memory] events (profile_memory=True): saved activations are "
                "taken as 0, so peak memory is low");
            return;
        }
        std::stable_sort(series.begin(), series.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        const auto value_at = [&](std::int64_t t) {  // allocated just before t
            auto it = std::lower_bound(series.begin(), series.end(), t,
                                       [](const auto& s, std::int64_t v) { return s.first < v; });
            return it == series.begin() ? series.front().second - 0.0 : std::prev(it)->second;
        };
        models::Workload& w = out_.workload;
        std::int64_t total = 0;
        for (std::size_t l = 0; l < w.layers.size(); ++l) {
            std::size_t first = SIZE_MAX, last = 0;
            for (std::size_t f = 0; f < layer_of.size(); ++f)
                if (static_cast<std::size_t>(layer_of[f]) == l) first = std::min(first, f), last = f;
            if (first == SIZE_MAX) continue;
            const TopOp& a = tops_[static_cast<std::size_t>(forward_[first])];
            const TopOp& b = tops_[static_cast<std::size_t>(forward_[last])];
            const double grown = value_at(b.start_ns + b.measured_ns) - value_at(a.start_ns);
            w.layers[l].saved_activation_bytes = std::max<std::int64_t>(0, static_cast<std::int64_t>(grown));
            total += w.layers[l].saved_activation_bytes;
        }
        out_.notes.push_back(fmt::format("saved activations from the trace's {} events: {} in all", m_.str(memory),
                                         format_bytes(total)));
        backward_transients(layer_of, series, value_at);
    }

    // What each layer's backward holds beyond what dtsim already counts:
    // torch's gradient temporaries (ReLU's input gradient beside the incoming
    // one, attention's). dtsim holds a layer's saved activations until its
    // backward ends and adds its parameter gradients after it, so by the time
    // layer l runs it holds what it held when backward began plus, for each
    // layer already done, its gradients less its saved activations. Layer l's
    // transient is the trace's peak inside its nodes over that, measured from
    // the same series: what the model would miss without it.
    template <typename ValueAt>
    void backward_transients(const std::vector<std::int32_t>& layer_of,
                             const std::vector<std::pair<std::int64_t, double>>& series, const ValueAt& value_at) {
        models::Workload& w = out_.workload;
        const std::size_t layers = w.layers.size();
        std::vector<std::int64_t> first(layers, std::numeric_limits<std::int64_t>::max()), last(layers, 0);
        for (std::int32_t i : nodes_) {
            const TopOp& t = tops_[static_cast<std::size_t>(i)];
            const auto l = static_cast<std::size_t>(layer_of[static_cast<std::size_t>(t.forward)]);
            first[l] = std::min(first[l], span(t.span).start_ns);
            last[l] = std::max(last[l], span(t.span).start_ns + span(t.span).dur_ns);
        }
        std::vector<std::size_t> order;
        for (std::size_t l = 0; l < layers; ++l)
            if (last[l] > 0) order.push_back(l);
        if (order.empty()) return;
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return first[a] < first[b]; });
        const double begin = value_at(first[order.front()]);
        double done = 0;  // the layers already run: their gradients less their saved activations
        std::int64_t largest = 0;
        std::size_t largest_layer = 0;
        for (std::size_t l : order) {
            double peak = value_at(first[l]);
            auto it = std::lower_bound(series.begin(), series.end(), first[l],
                                       [](const auto& x, std::int64_t v) { return x.first < v; });
            for (; it != series.end() && it->first <= last[l]; ++it) peak = std::max(peak, it->second);
            const auto transient = std::max<std::int64_t>(0, std::llround(peak - begin - done));
            w.layers[l].backward_transient_bytes = transient;
            if (transient > largest) largest = transient, largest_layer = l;
            done += static_cast<double>(w.layers[l].param_count() * dtype_bytes(out_.param_dtype) -
                                        w.layers[l].saved_activation_bytes);
        }
        if (largest > 0)
            out_.notes.push_back(
                fmt::format("backward's gradient temporaries from the same events: up to {} (layer {})",
                            format_bytes(largest), w.layers[largest_layer].name));
    }

    const TraceModel& m_;
    const std::string& source_;
    const TraceWorkloadOptions& o_;
    TraceWorkload out_;
    std::int32_t main_track_ = -1;
    std::int64_t window_begin_ = 0, window_end_ = 0;  // the step (or the whole trace), in the rank's time
    bool gpu_ = false;                                // the rank has GPU streams: ops priced by their kernels
    std::vector<TopOp> tops_;
    std::vector<std::int32_t> forward_;  // indices into tops_
    std::vector<std::int32_t> nodes_;    // backward nodes, AccumulateGrad included
    std::vector<Param> params_;
    std::string optimizer_name_;
    std::size_t collectives_ = 0;
};

}  // namespace

TraceWorkload workload_from_trace(const TraceModel& model, const std::string& source,
                                  const TraceWorkloadOptions& options) {
    return Reader(model, source, options).read();
}

}  // namespace dtsim::traces
