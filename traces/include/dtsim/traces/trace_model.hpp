// TraceModel: a Chrome / Kineto trace read into compact, typed form: the one
// in-memory shape that `dtsim import`, `simulate --from-trace` and the GUI
// share. Strings are interned (a name is an index into `strings`), times are
// integer nanoseconds (style.md §5), and the JSON text itself is never kept.
// Produced by trace_reader.hpp's read_trace(); also built from a
// sim::Timeline (from_timeline), so predicted and read traces look alike.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::traces {

using StringId = std::int32_t;
inline constexpr StringId kNoString = -1;

// What a track holds. Kineto: CPU threads (cpu_op, user_annotation,
// python_function, cuda_runtime), GPU streams (kernel, gpu_memcpy,
// gpu_memset, gpu_user_annotation); dtsim: one track per stream.
enum class TrackKind : std::uint8_t { cpu_thread, gpu_stream, dtsim_stream, other };

struct Track {
    std::int32_t rank = 0;        // index into TraceModel::ranks
    std::string pid;              // as written (Kineto pids/tids can be strings)
    std::string tid;
    std::string name;             // from thread_name metadata, else "tid <tid>"
    TrackKind kind = TrackKind::other;
    std::int32_t sort_index = 0;  // thread_sort_index, else order of appearance within its rank
    std::string process_name;     // from process_name metadata of its pid, else empty
};

// Coarse class of a span, shared by every analysis and by the GUI's colours.
// Derived from the category (case-insensitive) and, for kernels and gloo
// ops, the name (formats.md §2).
enum class SpanKind : std::uint8_t {
    compute,        // kernel (non-NCCL), cpu_op on a compute path, dtsim "compute"
    communication,  // NCCL kernels, gloo:* ops, c10d::*, dtsim "collective"
    memory,         // gpu_memcpy, gpu_memset, dtsim "copy"
    host,           // cuda_runtime, cuda_driver, python_function, dtsim "host" / "io"
    annotation,     // user_annotation, gpu_user_annotation, ProfilerStep#N
    other,
};

struct Arg {
    StringId key = kNoString;
    StringId value = kNoString;  // the value's JSON text for numbers, the string itself for strings
    bool is_number = false;
};

// An "X" event, or a "B"/"E" pair matched on its track.
struct Span {
    std::int32_t track = 0;       // index into TraceModel::tracks
    StringId name = kNoString;
    StringId category = kNoString;
    SpanKind kind = SpanKind::other;
    std::int64_t start_ns = 0;    // relative to the rank's file (Kineto: baseTimeNanoseconds)
    std::int64_t dur_ns = 0;
    std::int32_t args_begin = 0;  // [args_begin, args_end) in TraceModel::args
    std::int32_t args_end = 0;
};

struct Instant {
    std::int32_t track = 0;
    StringId name = kNoString;
    StringId category = kNoString;
    std::int64_t time_ns = 0;
};

// One "C" event series sample ("device memory" / Kineto "[memory]" are counters).
struct Counter {
    std::int32_t rank = 0;
    StringId name = kNoString;    // event name + "." + series key when a C event has several keys
    std::int64_t time_ns = 0;
    double value = 0;
};

// Device memory by category at its peak (dtsim's traces say so; others do not).
struct MemoryPart {
    std::int32_t rank = 0;
    std::string category;  // parameters, gradients, optimizer_states, activations, ...
    double bytes = 0;
};

// A flow edge (s -> f, through t steps), resolved to the spans it binds.
struct Flow {
    StringId name = kNoString;    // e.g. "ac2g", "fwdbwd", dtsim "dep"
    std::int32_t from_span = -1;  // index into TraceModel::spans, -1 if unresolved
    std::int32_t to_span = -1;
};

struct ProcessGroup {
    std::string name, desc, backend_config;
    std::int32_t size = 0;
    std::vector<std::int32_t> ranks;
};

// Kineto's "distributedInfo" (absent in a one-rank run) and what the file says of itself.
struct RankInfo {
    std::string source_file;      // the file this rank came from
    std::int32_t rank = 0;        // distributedInfo.rank, else dtsim's pid, else file order
    std::int32_t world_size = 0;  // 0 when unknown
    std::string backend;          // distributedInfo.backend ("gloo", "nccl") or "dtsim"
    std::vector<ProcessGroup> process_groups;
    std::string generator;        // "kineto", "kineto-legacy" (bare array, no cat), "dtsim", "chrome"
    std::int64_t base_time_ns = 0;
    std::vector<std::string> device_names;  // deviceProperties[].name
};

// What reading skipped, so that nothing is dropped silently.
struct ReadStats {
    std::uint64_t events = 0;                // trace events read, every phase
    std::uint64_t unknown_phase_events = 0;  // phases not modelled (async b/e/n, object N/O/D, R, P, ...)
    std::uint64_t dropped_events = 0;        // X without dur, flow ends that match no start or no slice
    std::uint64_t args_not_kept = 0;         // span args left out (see ReadOptions::keep_all_args)
};

struct TraceModel {
    std::vector<std::string> strings;
    std::vector<RankInfo> ranks;
    std::vector<Track> tracks;
    std::vector<Span> spans;      // sorted by (track, start_ns, longer first) after reading
    std::vector<Arg> args;
    std::vector<Instant> instants;
    std::vector<Counter> counters;
    std::vector<Flow> flows;
    std::vector<MemoryPart> device_memory_peak;  // in the file's order, per rank
    ReadStats stats;

    std::string_view str(StringId id) const { return id < 0 ? std::string_view{} : strings[static_cast<std::size_t>(id)]; }
    // The id of `s`, added to `strings` if new. Add strings only through this.
    StringId intern(std::string_view s);
    // The id of `s`, or kNoString when the model has no such string.
    StringId find(std::string_view s) const;
    // The value of a span's argument, or empty when it has none of that key.
    std::string_view arg(const Span& span, std::string_view key) const;

    // Spans of track t are [track_span_begin[t], track_span_begin[t + 1]) in
    // `spans` once sorted (filled by read_trace / from_timeline).
    std::vector<std::int32_t> track_span_begin;

private:
    // Open-addressing hash index over `strings` (ids only, so each string is
    // stored once); rebuilt if `strings` was changed behind intern's back.
    std::vector<StringId> index_;
    std::size_t indexed_count_ = 0;
    void rebuild_index(std::size_t slots);
};

// The SpanKind of a span from its category (case-insensitive, the first
// known item of a comma list) and name, per formats.md §2: NCCL kernels of
// both naming generations (ncclKernel_*, ncclDevKernel_*), gloo:* and nccl:*
// annotations and c10d::* / record_param_comms ops are communication;
// ProfilerStep#N is an annotation. `dtsim_trace`: categories are dtsim's own
// (compute, collective, copy, host, io).
SpanKind classify_span(std::string_view category, std::string_view name, bool dtsim_trace);

std::string_view to_string(SpanKind kind);
std::string_view to_string(TrackKind kind);

// Sorts spans by (track, start_ns, longer first) and fills track_span_begin;
// remaps flows. Called by the readers; needed again only after editing spans.
void sort_spans(TraceModel& model);

}  // namespace dtsim::traces
