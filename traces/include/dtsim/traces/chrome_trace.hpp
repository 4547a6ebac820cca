// Chrome Trace Event Format writer (object form; formats.md §1): complete
// "X" events in microseconds, a pid per rank and a named tid per stream,
// device memory as a counter track. Opens in Perfetto and chrome://tracing.
#pragma once

#include "dtsim/sim/timeline.hpp"

#include <string>

namespace dtsim::traces {

std::string chrome_trace_json(const sim::Timeline& timeline);

// Writes atomically: an existing file is replaced only by a complete trace.
void write_chrome_trace(const sim::Timeline& timeline, const std::string& path);

}  // namespace dtsim::traces
