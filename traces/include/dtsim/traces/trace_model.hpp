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
#include <unordered_map>
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
    std::int32_t sort_index = 0;  // thread_sort_index, else order of appearance
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

struct TraceModel {
    std::vector<std::string> strings;
    std::vector<RankInfo> ranks;
    std::vector<Track> tracks;
    std::vector<Span> spans;      // sorted by (track, start_ns, longer first) after reading
    std::vector<Arg> args;
    std::vector<Instant> instants;
    std::vector<Counter> counters;
    std::vector<Flow> flows;

    std::string_view str(StringId id) const { return id < 0 ? std::string_view{} : strings[static_cast<std::size_t>(id)]; }
    StringId intern(std::string_view s);
    // The value of a span's argument, or empty when it has none of that key.
    std::string_view arg(const Span& span, std::string_view key) const;

private:
    std::unordered_map<std::string, StringId> index_;
};

}  // namespace dtsim::traces
