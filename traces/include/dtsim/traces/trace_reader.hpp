// Reads Chrome Trace Event / Kineto traces (formats.md §1-2) into a
// TraceModel, streaming: the JSON text is tokenised in chunks and never held
// whole, so memory follows the number of events kept, not the file size.
//
// Accepts the object form ({"traceEvents": [...], ...}) and the array form
// ([...], Debian torch 1.13's legacy output), plain or gzip-compressed
// (.json.gz), one file or a directory of per-rank files (*.json, *.json.gz,
// Kineto's <worker>.<id>.pt.trace.json). dtsim's own simulated and measured
// traces read back to the same per-task times.
//
// A malformed file raises ParseError naming the file, the byte offset and
// line, and what was expected there.
#pragma once

#include "dtsim/traces/trace_model.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::sim {
struct Timeline;
}

namespace dtsim::traces {

struct ReadOptions {
    // Called now and then with bytes read so far and the total (0 when unknown,
    // e.g. gzip); for progress bars. May be empty.
    std::function<void(std::uint64_t done_bytes, std::uint64_t total_bytes)> progress;
    // false (default): a span keeps only the args dtsim's analyses and the
    // GUI's details use (kept_arg_keys()); Kineto writes a dozen per kernel,
    // mostly unique ids, which would cost more memory than the spans. true:
    // every arg (for small traces, e.g. a details panel that shows them all).
    bool keep_all_args = false;
    // Size of the buffer the text is read through.
    std::size_t chunk_bytes = std::size_t{1} << 20;
};

// The arg keys kept by default: Kineto's collective metadata (formats.md §2),
// "Input Dims", "Input type", memcpy "bytes", "stream", "device", and dtsim's
// own (task, phase, micro_step, layer, bucket, bytes, group_size, standalone_ns,
// waited_for_slowest_rank_ns).
const std::vector<std::string_view>& kept_arg_keys();

// path: a trace file or a directory of them (one rank per file).
TraceModel read_trace(const std::string& path, const ReadOptions& options = {});

// Reads several files or directories into one model, ranks in argument order
// unless the files name their rank (distributedInfo.rank).
TraceModel read_traces(const std::vector<std::string>& paths, const ReadOptions& options = {});

// The simulator's / executor's timeline in the same shape, without a JSON round trip.
TraceModel from_timeline(const sim::Timeline& timeline);

}  // namespace dtsim::traces
