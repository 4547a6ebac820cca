#include "dtsim/traces/trace_analysis.hpp"

#include "dtsim/common/error.hpp"
#include "kineto_args.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <map>
#include <optional>

namespace dtsim::traces {
namespace {

using detail::first_input_type;
using detail::iequals;
using detail::profiler_step;
using detail::starts_with;

struct Interval {
    std::int64_t begin = 0;
    std::int64_t end = 0;
};
using Intervals = std::vector<Interval>;

// Sorted, disjoint union of `v` (modified).
Intervals merge(Intervals v) {
    std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    Intervals out;
    for (const Interval& i : v) {
        if (i.end <= i.begin) continue;
        if (!out.empty() && i.begin <= out.back().end) out.back().end = std::max(out.back().end, i.end);
        else out.push_back(i);
    }
    return out;
}

std::int64_t length(const Intervals& v) {
    std::int64_t sum = 0;
    for (const Interval& i : v) sum += i.end - i.begin;
    return sum;
}

// Length of the intersection of two merged lists.
std::int64_t overlap(const Intervals& a, const Intervals& b) {
    std::int64_t sum = 0;
    std::size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        const std::int64_t lo = std::max(a[i].begin, b[j].begin);
        const std::int64_t hi = std::min(a[i].end, b[j].end);
        if (hi > lo) sum += hi - lo;
        if (a[i].end < b[j].end) ++i;
        else ++j;
    }
    return sum;
}

Intervals unite(const Intervals& a, const Intervals& b) {
    Intervals all = a;
    all.insert(all.end(), b.begin(), b.end());
    return merge(std::move(all));
}

std::int64_t parse_int(std::string_view s, std::int64_t fallback = 0) {
    std::int64_t v = 0;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (r.ec != std::errc{}) {
        double d = 0;
        const auto rd = std::from_chars(s.data(), s.data() + s.size(), d);
        return rd.ec == std::errc{} ? static_cast<std::int64_t>(d) : fallback;
    }
    return v;
}

// Bytes per element of a dtype as Kineto, gloo ops, NCCL kernel names or
// torch write it; 0 when unknown.
std::int64_t dtype_bytes(std::string_view t) {
    std::string s;
    for (char c : t) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (starts_with(s, "c10::")) s = s.substr(5);
    if (s == "float" || s == "float32" || s == "f32" || s == "int" || s == "int32" || s == "i32" || s == "u32" ||
        s == "uint32")
        return 4;
    if (s == "double" || s == "float64" || s == "f64" || s == "long" || s == "int64" || s == "i64" || s == "u64" ||
        s == "uint64")
        return 8;
    if (s == "half" || s == "float16" || s == "f16" || s == "bfloat16" || s == "bf16" || s == "short" || s == "int16")
        return 2;
    if (s == "byte" || s == "char" || s == "bool" || s == "int8" || s == "uint8" || s == "i8" || s == "u8" ||
        s == "float8_e4m3fn" || s == "float8_e5m2" || s == "f8e4m3" || s == "f8e5m2")
        return 1;
    return 0;
}

// "allreduce" from "AllReduce", "all_reduce", "allreduce_", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", ...
std::string normalise_op(std::string_view text) {
    std::string s;
    for (char c : text)
        if (c != '_' && c != ' ' && c != '-') s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    static const std::pair<std::string_view, std::string_view> kOps[] = {
        {"allreduce", "allreduce"},         {"reducescatter", "reducescatter"}, {"allgather", "allgather"},
        {"alltoall", "alltoall"},           {"broadcast", "broadcast"},         {"sendrecv", "sendrecv"},
        {"barrier", "barrier"},             {"reduce", "reduce"},               {"send", "sendrecv"},
        {"recv", "sendrecv"},               {"gather", "allgather"}};
    for (const auto& [needle, op] : kOps)
        if (s.find(needle) != std::string::npos) return std::string(op);
    return "unknown";
}

// The dtype in an NCCL kernel name: ncclDevKernel_AllReduce_Sum_f32_RING_LL,
// ncclKernel_AllReduce_RING_LL_Sum_float.
std::string dtype_from_kernel_name(std::string_view name) {
    static const std::string_view kTypes[] = {"bf16", "f16", "f32", "f64", "i8", "u8", "i32", "u32", "i64", "u64",
                                              "bfloat16", "half", "float", "double", "int8_t", "uint8_t"};
    std::size_t pos = 0;
    while (pos <= name.size()) {
        const std::size_t next = name.find_first_of("_(", pos);
        const std::string_view token = name.substr(pos, next == std::string_view::npos ? name.npos : next - pos);
        for (std::string_view t : kTypes)
            if (token == t) return std::string(t);
        if (next == std::string_view::npos || name[next] == '(') break;
        pos = next + 1;
    }
    return {};
}

// Product of the first tensor's dims in Kineto's "Input Dims" text: [[262656]]
// -> 262656, [[[787968]], [], ...] -> 787968 (a TensorList's first tensor).
std::int64_t first_tensor_elements(std::string_view dims_text) {
    if (dims_text.empty()) return 0;
    nlohmann::json j = nlohmann::json::parse(dims_text, nullptr, false);
    if (j.is_discarded() || !j.is_array() || j.empty()) return 0;
    const nlohmann::json* t = &j[0];
    while (t->is_array() && !t->empty() && (*t)[0].is_array()) t = &(*t)[0];
    if (!t->is_array() || t->empty()) return 0;
    std::int64_t n = 1;
    for (const auto& d : *t) {
        if (!d.is_number_integer()) return 0;
        n *= d.get<std::int64_t>();
    }
    return n;
}

struct Window {
    std::int64_t step = -1;
    std::int64_t start_ns = 0;  // the CPU step span (the step time)
    std::int64_t dur_ns = 0;
    Interval breakdown;         // what the breakdown covers
};

class Analyzer {
public:
    Analyzer(const TraceModel& m, const AnalysisOptions& o) : m_(m), o_(o) {
        launch_of_.assign(m.spans.size(), -1);
        for (const Flow& f : m.flows)
            if (f.from_span >= 0 && f.to_span >= 0) launch_of_[static_cast<std::size_t>(f.to_span)] = f.from_span;
    }

    TraceAnalysis run() {
        for (std::int32_t r = 0; r < static_cast<std::int32_t>(m_.ranks.size()); ++r) analyze_rank(r);
        find_stragglers();
        return std::move(out_);
    }

private:
    struct RankView {
        std::vector<std::int32_t> tracks;
        BreakdownBasis basis = BreakdownBasis::cpu_main_thread;
        std::int32_t main_thread = -1;
    };

    template <class F>
    void for_spans(std::int32_t track, F&& f) const {
        const auto b = m_.track_span_begin[static_cast<std::size_t>(track)];
        const auto e = m_.track_span_begin[static_cast<std::size_t>(track) + 1];
        for (std::int32_t i = b; i < e; ++i) f(i, m_.spans[static_cast<std::size_t>(i)]);
    }

    const Track& track(std::int32_t t) const { return m_.tracks[static_cast<std::size_t>(t)]; }
    bool category_is(const Span& s, std::string_view c) const { return iequals(m_.str(s.category), c); }

    RankView view_of(std::int32_t r) const {
        RankView v;
        bool gpu = false, dtsim = false;
        for (std::int32_t t = 0; t < static_cast<std::int32_t>(m_.tracks.size()); ++t) {
            if (track(t).rank != r) continue;
            v.tracks.push_back(t);
            gpu = gpu || track(t).kind == TrackKind::gpu_stream;
            dtsim = dtsim || track(t).kind == TrackKind::dtsim_stream;
        }
        v.basis = dtsim ? BreakdownBasis::dtsim_streams : gpu ? BreakdownBasis::gpu_kernels : BreakdownBasis::cpu_main_thread;
        // The main thread holds the steps; without them, the most cpu_op time.
        std::int64_t best = -1;
        for (std::int32_t t : v.tracks) {
            if (track(t).kind != TrackKind::cpu_thread) continue;
            std::int64_t score = 0;
            for_spans(t, [&](std::int32_t, const Span& s) {
                if (profiler_step(m_.str(s.name)) && s.kind == SpanKind::annotation) score += std::int64_t{1} << 50;
                else if (s.kind == SpanKind::compute) score += s.dur_ns;
            });
            if (score > best) {
                best = score;
                v.main_thread = t;
            }
        }
        return v;
    }

    std::vector<Window> windows_of(const RankView& v) const {
        std::map<std::int64_t, Window> steps;
        std::map<std::int64_t, Interval> gpu_steps;
        std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = std::numeric_limits<std::int64_t>::min();
        std::int64_t gpu_lo = lo, gpu_hi = hi;  // the device's first start and last end
        for (std::int32_t t : v.tracks) {
            const bool gpu_track = track(t).kind == TrackKind::gpu_stream;
            for_spans(t, [&](std::int32_t, const Span& s) {
                lo = std::min(lo, s.start_ns);
                hi = std::max(hi, s.start_ns + s.dur_ns);
                // HTA's window takes every event with a stream, the device's
                // syncs too (a Context Sync has stream 2^32-1, not -1), and
                // counts them neither compute nor non-compute.
                if (gpu_track || category_is(s, "cuda_sync")) {
                    gpu_lo = std::min(gpu_lo, s.start_ns);
                    gpu_hi = std::max(gpu_hi, s.start_ns + s.dur_ns);
                }
                if (s.kind != SpanKind::annotation) return;
                const auto n = profiler_step(m_.str(s.name));
                if (!n) return;
                if (gpu_track) gpu_steps.emplace(*n, Interval{s.start_ns, s.start_ns + s.dur_ns});
                else
                    steps.emplace(*n, Window{.step = *n,
                                             .start_ns = s.start_ns,
                                             .dur_ns = s.dur_ns,
                                             .breakdown = {s.start_ns, s.start_ns + s.dur_ns}});
            });
        }
        std::vector<Window> out;
        if (steps.empty()) {
            // No steps: the whole trace. On the GPU the breakdown runs from the
            // first kernel's start to the last one's end, as HTA's temporal
            // breakdown does (its kernel_time), not over the host's lead-in.
            const bool gpu = v.basis == BreakdownBasis::gpu_kernels && gpu_lo <= gpu_hi;
            if (lo <= hi && o_.step < 0)
                out.push_back(Window{.step = -1,
                                     .start_ns = lo,
                                     .dur_ns = hi - lo,
                                     .breakdown = gpu ? Interval{gpu_lo, gpu_hi} : Interval{lo, hi}});
            return out;
        }
        for (auto& [n, w] : steps) {
            if (o_.step >= 0 && n != o_.step) continue;
            if (v.basis == BreakdownBasis::gpu_kernels)
                if (auto it = gpu_steps.find(n); it != gpu_steps.end()) w.breakdown = it->second;
            out.push_back(w);
        }
        return out;
    }

    static Interval clip(const Span& s, const Interval& w) {
        return {std::max(s.start_ns, w.begin), std::min(s.start_ns + s.dur_ns, w.end)};
    }
    static bool starts_in(const Span& s, const Window& w) {
        return s.start_ns >= w.start_ns && s.start_ns < w.start_ns + std::max<std::int64_t>(w.dur_ns, 1);
    }
    bool in_any(const Span& s, const std::vector<Window>& ws, bool use_breakdown) const {
        for (const Window& w : ws) {
            const std::int64_t b = use_breakdown ? w.breakdown.begin : w.start_ns;
            const std::int64_t e = use_breakdown ? w.breakdown.end : w.start_ns + w.dur_ns;
            if (s.start_ns >= b && (s.start_ns < e || (s.start_ns == e && s.dur_ns == 0 && b == e))) return true;
        }
        return false;
    }

    void analyze_rank(std::int32_t r) {
        const RankView v = view_of(r);
        const std::vector<Window> windows = windows_of(v);
        if (windows.empty()) {
            if (o_.step >= 0) out_.notes.push_back(fmt::format("rank {}: no ProfilerStep#{}", m_.ranks[static_cast<std::size_t>(r)].rank, o_.step));
            return;
        }
        for (const Window& w : windows) out_.steps.push_back(analyze_step(r, v, w));
        summarize_ops(r, v, windows);
        summarize_annotations(r, v, windows);
        list_collectives(r, v, windows);
    }

    // The step's peak of Kineto's [memory] counters on rank r: a GPU series
    // where the rank has one (the busiest), else the CPU's. The reader sorts
    // counters by rank, series and time, so each series' samples in the step
    // are found by binary search, not by a pass over every counter per step.
    void peak_memory(std::int32_t r, const Window& w, StepAnalysis& a) const {
        const auto& cs = m_.counters;
        const auto [lo, hi] = std::equal_range(cs.begin(), cs.end(), Counter{.rank = r},
                                               [](const Counter& x, const Counter& y) { return x.rank < y.rank; });
        bool device = false;
        for (auto series = lo; series != hi;) {
            const std::string_view name = m_.str(series->name);
            const auto next =
                std::partition_point(series, hi, [&](const Counter& c) { return m_.str(c.name) <= name; });
            const bool gpu = name.starts_with("[memory] GPU");
            if (name.starts_with("[memory] ") && (gpu || !device)) {
                if (gpu && !device) a.peak_allocated_bytes = -1;  // a device series outranks the CPU's
                device = device || gpu;
                auto c = std::lower_bound(series, next, w.start_ns,
                                          [](const Counter& x, std::int64_t t) { return x.time_ns < t; });
                for (; c != next && c->time_ns <= w.start_ns + w.dur_ns; ++c)
                    if (c->value > a.peak_allocated_bytes) {
                        a.peak_allocated_bytes = c->value;
                        a.memory_series = std::string(name);
                    }
            }
            series = next;
        }
    }

    StepAnalysis analyze_step(std::int32_t r, const RankView& v, const Window& w) const {
        StepAnalysis a{.rank = r,
                       .step = w.step,
                       .start_ns = w.start_ns,
                       .dur_ns = w.dur_ns,
                       .basis = v.basis,
                       .window_ns = w.breakdown.end - w.breakdown.begin,
                       .breakdown = {},
                       .comm_ns = 0,
                       .comm_under_compute_ns = 0,
                       .overlap_ratio = 0,
                       .idle = {},
                       .peak_allocated_bytes = -1,
                       .memory_series = {}};
        peak_memory(r, w, a);
        Intervals compute, comm, memory;
        for (std::int32_t t : v.tracks) {
            const Track& tr = track(t);
            const bool device = tr.kind == TrackKind::gpu_stream || tr.kind == TrackKind::dtsim_stream;
            const bool cpu_basis = v.basis == BreakdownBasis::cpu_main_thread;
            if (!cpu_basis && !device) continue;
            if (cpu_basis && tr.kind != TrackKind::cpu_thread) continue;
            for_spans(t, [&](std::int32_t, const Span& s) {
                if (s.start_ns >= w.breakdown.end || s.start_ns + s.dur_ns <= w.breakdown.begin) return;
                const Interval i = clip(s, w.breakdown);
                if (s.kind == SpanKind::communication) comm.push_back(i);
                else if (s.kind == SpanKind::memory && !cpu_basis) memory.push_back(i);
                else if (s.kind == SpanKind::compute && (!cpu_basis || t == v.main_thread)) compute.push_back(i);
            });
        }
        compute = merge(std::move(compute));
        comm = merge(std::move(comm));
        const Intervals busy = unite(unite(compute, comm), merge(std::move(memory)));
        a.breakdown.compute_ns = length(compute);
        a.breakdown.non_compute_ns = length(busy) - a.breakdown.compute_ns;
        a.breakdown.idle_ns = a.window_ns - length(busy);
        a.comm_ns = length(comm);
        a.comm_under_compute_ns = overlap(compute, comm);
        a.overlap_ratio = a.comm_ns > 0 ? static_cast<double>(a.comm_under_compute_ns) / static_cast<double>(a.comm_ns) : 0;
        if (v.basis == BreakdownBasis::gpu_kernels) a.idle = idle_causes(v, w);
        return a;
    }

    IdleCauses idle_causes(const RankView& v, const Window& w) const {
        IdleCauses c;
        constexpr std::int64_t kKernelWaitNs = 30;  // HTA's consecutive_kernel_delay default
        bool any_launch = false;
        for (std::int32_t t : v.tracks) {
            if (track(t).kind != TrackKind::gpu_stream) continue;
            const Span* prev = nullptr;
            for_spans(t, [&](std::int32_t i, const Span& s) {
                if (s.kind != SpanKind::compute && s.kind != SpanKind::communication && s.kind != SpanKind::memory) return;
                if (s.start_ns < w.breakdown.begin || s.start_ns >= w.breakdown.end) return;
                if (launch_of_[static_cast<std::size_t>(i)] >= 0) any_launch = true;
                if (prev != nullptr) {
                    const std::int64_t prev_end = prev->start_ns + prev->dur_ns;
                    const std::int64_t gap = s.start_ns - prev_end;
                    if (gap > 0) {
                        const std::int32_t launch = launch_of_[static_cast<std::size_t>(i)];
                        if (gap < kKernelWaitNs) c.kernel_wait_ns += gap;
                        else if (launch >= 0 && m_.spans[static_cast<std::size_t>(launch)].start_ns >= prev_end)
                            c.host_wait_ns += gap;
                        else c.other_wait_ns += gap;
                    }
                }
                if (prev == nullptr || s.start_ns + s.dur_ns > prev->start_ns + prev->dur_ns) prev = &s;
            });
        }
        c.computable = any_launch;
        return c;
    }

    bool counts_as_op(const RankView& v, const Track& tr, const Span& s) const {
        switch (v.basis) {
            case BreakdownBasis::gpu_kernels:
                return tr.kind == TrackKind::gpu_stream &&
                       (s.kind == SpanKind::compute || s.kind == SpanKind::communication || s.kind == SpanKind::memory);
            case BreakdownBasis::cpu_main_thread:
                return tr.kind == TrackKind::cpu_thread && (category_is(s, "cpu_op") || category_is(s, "operator") ||
                                                             (s.category == kNoString && s.kind != SpanKind::annotation));
            case BreakdownBasis::dtsim_streams: return tr.kind == TrackKind::dtsim_stream;
        }
        return false;
    }

    // Count, total, min, max and mean duration per span name over the rank's
    // tracks, for the spans keep(track, span) accepts, largest total first.
    // make(span) fills a summary's identity (rank, name, kind).
    template <class Summary, class Keep, class Make>
    std::vector<Summary> tally_by_name(const RankView& v, Keep keep, Make make) {
        std::map<StringId, Summary> by_name;
        for (std::int32_t t : v.tracks) {
            const Track& tr = track(t);
            for_spans(t, [&](std::int32_t, const Span& s) {
                if (!keep(tr, s)) return;
                auto [it, fresh] = by_name.try_emplace(s.name);
                Summary& o = it->second;
                if (fresh) {
                    o = make(s);
                    o.count = 0;
                    o.total_ns = 0;
                    o.min_ns = o.max_ns = s.dur_ns;
                }
                ++o.count;
                o.total_ns += s.dur_ns;
                o.min_ns = std::min(o.min_ns, s.dur_ns);
                o.max_ns = std::max(o.max_ns, s.dur_ns);
            });
        }
        std::vector<Summary> list;
        for (auto& [id, o] : by_name) {
            o.mean_ns = static_cast<double>(o.total_ns) / static_cast<double>(o.count);
            list.push_back(std::move(o));
        }
        std::sort(list.begin(), list.end(), [](const Summary& a, const Summary& b) {
            return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
        });
        return list;
    }

    void summarize_ops(std::int32_t r, const RankView& v, const std::vector<Window>& ws) {
        auto ops = tally_by_name<OpSummary>(
            v,
            [&](const Track& tr, const Span& s) {
                return counts_as_op(v, tr, s) && in_any(s, ws, tr.kind == TrackKind::gpu_stream);
            },
            [&](const Span& s) { return OpSummary{.rank = r, .name = std::string(m_.str(s.name)), .kind = s.kind}; });
        if (ops.size() > o_.top_k) ops.resize(o_.top_k);
        out_.top_ops.insert(out_.top_ops.end(), ops.begin(), ops.end());
    }

    void summarize_annotations(std::int32_t r, const RankView& v, const std::vector<Window>& ws) {
        const auto list = tally_by_name<AnnotationSummary>(
            v,
            [&](const Track&, const Span& s) {
                return category_is(s, "user_annotation") && (o_.step < 0 || in_any(s, ws, false));
            },
            [&](const Span& s) { return AnnotationSummary{.rank = r, .name = std::string(m_.str(s.name))}; });
        out_.annotations.insert(out_.annotations.end(), list.begin(), list.end());
    }

    void finish_call(CollectiveCall& c, std::int64_t in_elems, std::int64_t out_elems, std::int64_t elem_bytes) const {
        const std::int64_t n = std::max(c.group_size, 1);
        if (elem_bytes > 0) {
            if (c.op == "allgather")
                c.size_bytes = (out_elems > 0 ? out_elems : in_elems * n) * elem_bytes;
            else
                c.size_bytes = (in_elems > 0 ? in_elems : out_elems) * elem_bytes;
        }
        if (c.size_bytes > 0 && c.dur_ns > 0) {
            c.algbw_gbps = static_cast<double>(c.size_bytes) / static_cast<double>(c.dur_ns);  // B/ns = GB/s
            c.busbw_gbps = c.algbw_gbps * bus_bandwidth_factor(c.op, c.group_size);
        }
    }

    void list_collectives(std::int32_t r, const RankView& v, const std::vector<Window>& ws) {
        const RankInfo& info = m_.ranks[static_cast<std::size_t>(r)];
        std::vector<CollectiveCall> calls;
        std::vector<const Span*> gloo, enqueue;
        for (std::int32_t t : v.tracks) {
            const Track& tr = track(t);
            for_spans(t, [&](std::int32_t, const Span& s) {
                if (s.kind != SpanKind::communication) return;
                const std::string_view name = m_.str(s.name);
                if (tr.kind == TrackKind::gpu_stream || tr.kind == TrackKind::dtsim_stream) {
                    if (!in_any(s, ws, tr.kind == TrackKind::gpu_stream)) return;
                    CollectiveCall c{.rank = r,
                                     .ordinal = 0,
                                     .op = {},
                                     .name = std::string(name),
                                     .dtype = std::string(m_.arg(s, "dtype")),
                                     .start_ns = s.start_ns,
                                     .dur_ns = s.dur_ns,
                                     .size_bytes = 0,
                                     .group_size = 0};
                    const std::string_view coll = m_.arg(s, "Collective name");
                    c.op = normalise_op(coll.empty() ? name : coll);
                    if (c.dtype.empty() && tr.kind == TrackKind::gpu_stream) c.dtype = dtype_from_kernel_name(name);
                    const std::string_view group = m_.arg(s, "Group size");
                    const std::string_view dtsim_group = m_.arg(s, "group_size");
                    c.group_size = static_cast<std::int32_t>(
                        !group.empty() ? parse_int(group) : !dtsim_group.empty() ? parse_int(dtsim_group) : info.world_size);
                    if (tr.kind == TrackKind::dtsim_stream) {
                        c.size_bytes = parse_int(m_.arg(s, "bytes"));
                        finish_call(c, 0, 0, 0);
                    } else {
                        finish_call(c, parse_int(m_.arg(s, "In msg nelems")), parse_int(m_.arg(s, "Out msg nelems")),
                                    dtype_bytes(c.dtype));
                    }
                    calls.push_back(std::move(c));
                } else if (tr.kind == TrackKind::cpu_thread) {
                    if (!in_any(s, ws, false)) return;
                    if (starts_with(name, "gloo:")) gloo.push_back(&s);
                    else if (starts_with(name, "c10d::")) enqueue.push_back(&s);
                }
            });
        }
        // gloo: the k-th c10d::* enqueue goes with the k-th gloo:* op (formats.md §2).
        const auto by_start = [](const Span* a, const Span* b) {
            return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->track < b->track;
        };
        std::sort(gloo.begin(), gloo.end(), by_start);
        std::sort(enqueue.begin(), enqueue.end(), by_start);
        for (std::size_t k = 0; k < gloo.size(); ++k) {
            const Span& g = *gloo[k];
            const Span* e = k < enqueue.size() ? enqueue[k] : nullptr;
            CollectiveCall c{.rank = r,
                             .ordinal = 0,
                             .op = normalise_op(m_.str(g.name).substr(5)),
                             .name = std::string(m_.str(g.name)),
                             .dtype = first_input_type(m_.arg(g, "Input type")),
                             .start_ns = e != nullptr ? e->start_ns : g.start_ns,
                             .dur_ns = g.dur_ns,
                             .size_bytes = 0,
                             .group_size = info.world_size};
            std::int64_t elems = first_tensor_elements(m_.arg(g, "Input Dims"));
            if (elems == 0 && e != nullptr) elems = first_tensor_elements(m_.arg(*e, "Input Dims"));
            // gloo's all_gather input is one rank's part; S is the gathered whole.
            finish_call(c, elems, c.op == "allgather" ? elems * std::max(c.group_size, 1) : 0, dtype_bytes(c.dtype));
            calls.push_back(std::move(c));
        }
        if (gloo.size() != enqueue.size() && !gloo.empty())
            out_.notes.push_back(fmt::format("rank {}: {} gloo ops but {} c10d enqueue ops; unpaired ones use their own "
                                             "start",
                                             info.rank, gloo.size(), enqueue.size()));
        std::stable_sort(calls.begin(), calls.end(), [](const CollectiveCall& a, const CollectiveCall& b) {
            return a.start_ns < b.start_ns;
        });
        for (std::size_t k = 0; k < calls.size(); ++k) calls[k].ordinal = static_cast<std::int32_t>(k);
        out_.collectives.insert(out_.collectives.end(), calls.begin(), calls.end());
    }

    // The k-th collective of every rank is the same collective (ranks issue
    // them in one order); the rank that entered it last held the others up.
    void find_stragglers() {
        if (m_.ranks.size() < 2) return;
        std::map<std::int32_t, std::vector<CollectiveCall*>> by_ordinal;
        for (CollectiveCall& c : out_.collectives) by_ordinal[c.ordinal].push_back(&c);
        bool mismatch = false;
        for (auto& [k, calls] : by_ordinal) {
            if (calls.size() < 2) {
                mismatch = true;
                continue;
            }
            const auto abs = [&](const CollectiveCall* c) {
                return m_.ranks[static_cast<std::size_t>(c->rank)].base_time_ns + c->start_ns;
            };
            const CollectiveCall* last = calls[0];
            std::int64_t first_entry = abs(calls[0]);
            for (const CollectiveCall* c : calls) {
                if (abs(c) > abs(last)) last = c;
                first_entry = std::min(first_entry, abs(c));
            }
            for (CollectiveCall* c : calls) {
                c->straggler_rank = m_.ranks[static_cast<std::size_t>(last->rank)].rank;
                c->straggler_lag_ns = abs(last) - first_entry;
            }
            if (calls.size() != m_.ranks.size()) mismatch = true;
        }
        if (mismatch)
            out_.notes.push_back(
                "ranks recorded different numbers of collectives; stragglers are matched by order where several have one");
    }

    const TraceModel& m_;
    const AnalysisOptions& o_;
    std::vector<std::int32_t> launch_of_;  // span -> the span that launched it (ac2g flow), -1 if none
    TraceAnalysis out_;
};

}  // namespace

std::string_view to_string(BreakdownBasis basis) {
    switch (basis) {
        case BreakdownBasis::gpu_kernels: return "gpu kernels";
        case BreakdownBasis::cpu_main_thread: return "cpu main thread";
        case BreakdownBasis::dtsim_streams: return "dtsim streams";
    }
    return "unknown";
}

double bus_bandwidth_factor(std::string_view op, std::int32_t ranks) {
    if (ranks <= 0) return 1.0;
    const double n = ranks;
    if (op == "allreduce") return 2.0 * (n - 1) / n;
    if (op == "allgather" || op == "reducescatter" || op == "alltoall") return (n - 1) / n;
    return 1.0;
}

TraceAnalysis analyze_trace(const TraceModel& model, const AnalysisOptions& options) {
    DTSIM_ASSERT(model.track_span_begin.size() == model.tracks.size() + 1,
                 "analyze_trace needs a model whose spans are sorted (sort_spans)");
    return Analyzer(model, options).run();
}

}  // namespace dtsim::traces
