// Where the GUI's TraceModels come from: files (traces::read_traces) and the
// simulator (a sim::Timeline). One place, so every view sees the same shape.
#pragma once

#include "dtsim/sim/timeline.hpp"
#include "dtsim/traces/trace_model.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::gui {

// The simulator's timeline as a TraceModel.
std::shared_ptr<const traces::TraceModel> model_from_timeline(const sim::Timeline& timeline);

// Trace files or directories (Chrome / Kineto / dtsim), ranks in argument order.
std::shared_ptr<const traces::TraceModel> model_from_files(const std::vector<std::string>& paths);

// The value of a span's argument as text, empty when absent.
std::string_view span_arg(const traces::TraceModel& model, const traces::Span& span, std::string_view key);

}  // namespace dtsim::gui
