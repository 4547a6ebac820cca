#include "dtsim/traces/trace_model.hpp"

#include "kineto_args.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/sim/timeline.hpp"
#include "dtsim/traces/trace_reader.hpp"

#include <algorithm>
#include <array>
#include <functional>
#include <numeric>

namespace dtsim::traces {
namespace {

std::size_t hash_text(std::string_view s) { return std::hash<std::string_view>{}(s); }

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        char x = a[i];
        if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
        if (x != b[i]) return false;
    }
    return true;
}

using detail::starts_with;
bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// HTA's communication-kernel pattern, (^nccl.*)|(^hccl)|(.*ncclKernel.*), plus
// NCCL >= 2.19's ncclDevKernel_* and ROCm's rccl; "void " prefixes of
// demangled names are looked through.
bool is_comm_kernel(std::string_view name) {
    if (starts_with(name, "void ")) name.remove_prefix(5);
    return starts_with(name, "nccl") || starts_with(name, "rccl") || starts_with(name, "hccl") ||
           contains(name, "ncclKernel") || contains(name, "ncclDevKernel");
}

bool is_comm_op_name(std::string_view name) {
    return starts_with(name, "c10d::") || starts_with(name, "gloo:") || starts_with(name, "nccl:") ||
           name == "record_param_comms" || starts_with(name, "ProcessGroupNCCL") || starts_with(name, "ProcessGroupGloo");
}

// Classification of one category item; false when the item is not known.
bool classify_item(std::string_view cat, std::string_view name, bool dtsim_trace, SpanKind& kind) {
    if (dtsim_trace) {
        if (iequals(cat, "compute")) kind = SpanKind::compute;
        else if (iequals(cat, "collective")) kind = SpanKind::communication;
        else if (iequals(cat, "copy")) kind = SpanKind::memory;
        else if (iequals(cat, "host") || iequals(cat, "io")) kind = SpanKind::host;
        else return false;
        return true;
    }
    if (iequals(cat, "kernel")) {
        kind = is_comm_kernel(name) ? SpanKind::communication : SpanKind::compute;
    } else if (iequals(cat, "gpu_memcpy") || iequals(cat, "gpu_memset")) {
        kind = SpanKind::memory;
    } else if (iequals(cat, "cpu_op") || iequals(cat, "operator")) {
        kind = is_comm_op_name(name) ? SpanKind::communication : SpanKind::compute;
    } else if (iequals(cat, "user_annotation") || iequals(cat, "gpu_user_annotation")) {
        kind = is_comm_op_name(name) ? SpanKind::communication : SpanKind::annotation;
    } else if (iequals(cat, "collective_comm")) {
        kind = SpanKind::communication;
    } else if (iequals(cat, "cuda_runtime") || iequals(cat, "cuda_driver") || iequals(cat, "python_function") ||
               iequals(cat, "overhead") || iequals(cat, "runtime") || iequals(cat, "python")) {
        kind = SpanKind::host;
    } else {
        return false;
    }
    return true;
}

}  // namespace

// ---- strings --------------------------------------------------------------

void TraceModel::rebuild_index(std::size_t slots) {
    index_.assign(slots, kNoString);
    const std::size_t mask = slots - 1;
    for (std::size_t id = 0; id < strings.size(); ++id) {
        std::size_t i = hash_text(strings[id]) & mask;
        while (index_[i] != kNoString) i = (i + 1) & mask;
        index_[i] = static_cast<StringId>(id);
    }
    indexed_count_ = strings.size();
}

StringId TraceModel::find(std::string_view s) const {
    if (index_.empty() || indexed_count_ != strings.size()) {
        for (std::size_t id = 0; id < strings.size(); ++id)
            if (strings[id] == s) return static_cast<StringId>(id);
        return kNoString;
    }
    const std::size_t mask = index_.size() - 1;
    for (std::size_t i = hash_text(s) & mask;; i = (i + 1) & mask) {
        const StringId id = index_[i];
        if (id == kNoString) return kNoString;
        if (strings[static_cast<std::size_t>(id)] == s) return id;
    }
}

StringId TraceModel::intern(std::string_view s) {
    // Load factor at most 1/2: lookups stay a probe or two.
    if (indexed_count_ != strings.size() || (strings.size() + 1) * 2 > index_.size()) {
        std::size_t slots = 64;
        while (slots < (strings.size() + 1) * 4) slots *= 2;
        rebuild_index(slots);
    }
    const std::size_t mask = index_.size() - 1;
    std::size_t i = hash_text(s) & mask;
    for (;; i = (i + 1) & mask) {
        const StringId id = index_[i];
        if (id == kNoString) break;
        if (strings[static_cast<std::size_t>(id)] == s) return id;
    }
    const auto id = static_cast<StringId>(strings.size());
    strings.emplace_back(s);
    index_[i] = id;
    indexed_count_ = strings.size();
    return id;
}

std::string_view TraceModel::arg(const Span& span, std::string_view key) const {
    for (std::int32_t a = span.args_begin; a < span.args_end; ++a) {
        const Arg& x = args[static_cast<std::size_t>(a)];
        if (str(x.key) == key) return str(x.value);
    }
    return {};
}

// ---- classification --------------------------------------------------------

SpanKind classify_span(std::string_view category, std::string_view name, bool dtsim_trace) {
    std::string_view rest = category;
    while (!rest.empty()) {
        const std::size_t comma = rest.find(',');
        std::string_view item = rest.substr(0, comma);
        while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
        while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
        SpanKind kind = SpanKind::other;
        if (classify_item(item, name, dtsim_trace, kind)) {
            if (kind == SpanKind::annotation && starts_with(name, "ProfilerStep#")) return SpanKind::annotation;
            return kind;
        }
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
    }
    // No known category (torch 1.13's legacy traces have none): by name alone.
    if (starts_with(name, "ProfilerStep#")) return SpanKind::annotation;
    if (is_comm_kernel(name) || is_comm_op_name(name)) return SpanKind::communication;
    if (category.empty() && starts_with(name, "aten::")) return SpanKind::compute;
    return SpanKind::other;
}

std::string_view to_string(SpanKind kind) {
    switch (kind) {
        case SpanKind::compute: return "compute";
        case SpanKind::communication: return "communication";
        case SpanKind::memory: return "memory";
        case SpanKind::host: return "host";
        case SpanKind::annotation: return "annotation";
        case SpanKind::other: return "other";
    }
    return "other";
}

std::string_view to_string(TrackKind kind) {
    switch (kind) {
        case TrackKind::cpu_thread: return "cpu_thread";
        case TrackKind::gpu_stream: return "gpu_stream";
        case TrackKind::dtsim_stream: return "dtsim_stream";
        case TrackKind::other: return "other";
    }
    return "other";
}

// ---- ordering -------------------------------------------------------------

namespace {
bool span_before(const Span& a, const Span& b) {
    if (a.track != b.track) return a.track < b.track;
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    if (a.dur_ns != b.dur_ns) return a.dur_ns > b.dur_ns;  // the enclosing slice first
    if (a.args_begin != b.args_begin) return a.args_begin < b.args_begin;
    if (a.name != b.name) return a.name < b.name;
    return a.category < b.category;
}
}  // namespace

void sort_spans(TraceModel& m) {
    if (m.flows.empty()) {
        std::sort(m.spans.begin(), m.spans.end(), span_before);
    } else {
        std::vector<std::int32_t> order(m.spans.size());
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
            return span_before(m.spans[static_cast<std::size_t>(a)], m.spans[static_cast<std::size_t>(b)]);
        });
        std::vector<std::int32_t> new_index(m.spans.size());
        std::vector<Span> sorted(m.spans.size());
        for (std::size_t i = 0; i < order.size(); ++i) {
            sorted[i] = m.spans[static_cast<std::size_t>(order[i])];
            new_index[static_cast<std::size_t>(order[i])] = static_cast<std::int32_t>(i);
        }
        m.spans = std::move(sorted);
        for (Flow& f : m.flows) {
            if (f.from_span >= 0) f.from_span = new_index[static_cast<std::size_t>(f.from_span)];
            if (f.to_span >= 0) f.to_span = new_index[static_cast<std::size_t>(f.to_span)];
        }
    }
    m.track_span_begin.assign(m.tracks.size() + 1, 0);
    for (const Span& s : m.spans) ++m.track_span_begin[static_cast<std::size_t>(s.track) + 1];
    for (std::size_t t = 1; t < m.track_span_begin.size(); ++t) m.track_span_begin[t] += m.track_span_begin[t - 1];
}

// ---- from a Timeline --------------------------------------------------------

TraceModel from_timeline(const sim::Timeline& tl) {
    TraceModel m;
    const std::size_t rank_count = std::max<std::size_t>(tl.ranks.size(), 1);
    for (std::size_t r = 0; r < rank_count; ++r) {
        m.ranks.push_back(RankInfo{.source_file = "",
                                   .rank = static_cast<std::int32_t>(r),
                                   .world_size = 0,
                                   .backend = "dtsim",
                                   .process_groups = {},
                                   .generator = "dtsim",
                                   .base_time_ns = 0,
                                   .device_names = {}});
        // The same tracks the written trace names: every stream of every rank.
        for (std::size_t s = 0; s < tl.streams.size(); ++s)
            m.tracks.push_back(Track{.rank = static_cast<std::int32_t>(r),
                                     .pid = std::to_string(r),
                                     .tid = std::to_string(s + 1),
                                     .name = tl.streams[s],
                                     .kind = TrackKind::dtsim_stream,
                                     .sort_index = static_cast<std::int32_t>(s),
                                     .process_name = r < tl.ranks.size() ? tl.ranks[r] : "rank 0"});
    }
    m.spans.reserve(tl.events.size());
    for (const sim::TimelineEvent& e : tl.events) {
        DTSIM_ASSERT(e.rank >= 0 && static_cast<std::size_t>(e.rank) < rank_count && e.stream >= 0 &&
                         static_cast<std::size_t>(e.stream) < tl.streams.size(),
                     "a timeline event on a rank or stream the timeline does not name");
        const auto track = static_cast<std::int32_t>(static_cast<std::size_t>(e.rank) * tl.streams.size() +
                                                     static_cast<std::size_t>(e.stream));
        const auto args_begin = static_cast<std::int32_t>(m.args.size());
        for (const sim::TimelineArg& a : e.args) {
            if (const auto* v = std::get_if<std::int64_t>(&a.value))
                m.args.push_back(Arg{.key = m.intern(a.key), .value = m.intern(std::to_string(*v)), .is_number = true});
            else
                m.args.push_back(
                    Arg{.key = m.intern(a.key), .value = m.intern(std::get<std::string>(a.value)), .is_number = false});
        }
        m.spans.push_back(Span{.track = track,
                               .name = m.intern(e.name),
                               .category = m.intern(e.category),
                               .kind = classify_span(e.category, e.name, true),
                               .start_ns = e.start_ns,
                               .dur_ns = e.dur_ns,
                               .args_begin = args_begin,
                               .args_end = static_cast<std::int32_t>(m.args.size())});
    }
    for (const auto& [category, bytes] : tl.device_memory_peak)
        m.device_memory_peak.push_back(
            MemoryPart{.rank = 0, .category = category, .bytes = static_cast<double>(bytes)});
    // The events' dependencies as flows, as the written trace has them.
    const StringId dep = m.intern("dep");
    for (std::size_t i = 0; i < tl.events.size(); ++i)
        for (const std::int32_t d : tl.events[i].deps)
            if (d >= 0 && static_cast<std::size_t>(d) < tl.events.size())
                m.flows.push_back(Flow{.name = dep, .from_span = d, .to_span = static_cast<std::int32_t>(i)});
    for (const auto& [name, samples] : {std::pair{"device memory", &tl.device_memory_bytes},
                                        std::pair{"host memory", &tl.host_memory_bytes}}) {
        const StringId id = samples->empty() ? kNoString : m.intern(name);
        for (const sim::CounterSample& c : *samples)
            m.counters.push_back(Counter{
                .rank = c.rank, .name = id, .time_ns = c.time_ns, .value = static_cast<double>(c.value)});
    }
    m.stats.events = tl.events.size();
    sort_spans(m);
    return m;
}

}  // namespace dtsim::traces
