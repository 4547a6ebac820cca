// Fuzzes the streaming trace reader (traces/trace_reader.cpp and its
// tokenizer, traces/json_cursor.cpp) and the analysis of what it reads. The
// input is written to a file, as read_trace takes paths (gzip inputs are
// found by their magic bytes, so the fuzzer reaches zlib's path too), and
// read twice: with 16-byte chunks, so that every token crosses a chunk
// boundary somewhere, and with the default 1 MiB. Both must agree on
// success or failure, and on the spans read; a ParseError is an expected
// outcome, anything else is a bug. What reads is also analysed and read as a
// --from-trace workload (traces/trace_workload.cpp): that may refuse it with a
// one-line ParseError, never crash.
#include "dtsim/traces/trace_analysis.hpp"
#include "dtsim/traces/trace_reader.hpp"
#include "dtsim/traces/trace_workload.hpp"
#include "fuzz_main.hpp"

#include <unistd.h>
#include <cstdio>
#include <string>

namespace {

const std::string& scratch_path() {
    static const std::string path = "/tmp/dtsim_trace_reader_fuzz_" + std::to_string(::getpid()) + ".json";
    return path;
}

// "" on success, else the error's message.
std::string read_into(dtsim::traces::TraceModel& model, std::size_t chunk_bytes, bool keep_all_args) {
    try {
        dtsim::traces::ReadOptions options;
        options.chunk_bytes = chunk_bytes;
        options.keep_all_args = keep_all_args;
        model = dtsim::traces::read_trace(scratch_path(), options);
        return "";
    } catch (const dtsim::Error& e) {
        const std::string what = e.what();
        if (what.empty() || what.find('\n') != std::string::npos) __builtin_trap();  // one line, never empty
        return what;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    {
        std::FILE* f = std::fopen(scratch_path().c_str(), "wb");
        if (f == nullptr) return 0;
        std::fwrite(data, 1, size, f);
        std::fclose(f);
    }
    dtsim::traces::TraceModel small, big;
    const std::string small_error = read_into(small, 16, true);
    const std::string big_error = read_into(big, std::size_t{1} << 20, false);
    if (small_error.empty() != big_error.empty()) __builtin_trap();  // chunking changed the outcome
    if (!small_error.empty()) return 0;
    if (small.spans.size() != big.spans.size() || small.flows.size() != big.flows.size()) __builtin_trap();
    for (std::size_t i = 0; i < small.spans.size(); ++i)
        if (small.spans[i].start_ns != big.spans[i].start_ns || small.spans[i].dur_ns != big.spans[i].dur_ns ||
            small.str(small.spans[i].name) != big.str(big.spans[i].name))
            __builtin_trap();
    // The analysis of anything the reader accepts must not fail.
    const auto analysis = dtsim::traces::analyze_trace(big, dtsim::traces::AnalysisOptions{.step = -1, .top_k = 5});
    (void)analysis;
    try {
        const auto workload = dtsim::traces::workload_from_trace(big, scratch_path());
        if (workload.workload.layers.empty() || workload.workload.param_count() <= 0) __builtin_trap();
    } catch (const dtsim::Error& e) {
        const std::string what = e.what();
        if (what.empty() || what.find('\n') != std::string::npos) __builtin_trap();
    }
    return 0;
}
