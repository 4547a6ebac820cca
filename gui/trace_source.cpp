#include "dtsim/gui/trace_source.hpp"

#include "dtsim/traces/trace_reader.hpp"

#include <filesystem>

namespace dtsim::gui {

std::shared_ptr<const traces::TraceModel> model_from_timeline(const sim::Timeline& timeline) {
    return std::make_shared<const traces::TraceModel>(traces::from_timeline(timeline));
}

std::shared_ptr<const traces::TraceModel> model_from_files(const std::vector<std::string>& paths) {
    // Every arg of small traces, for the details pane; large ones keep the
    // reader's default set (Kineto writes a dozen ids per kernel).
    constexpr std::uintmax_t kAllArgsBelowBytes = 64u << 20;
    std::uintmax_t bytes = 0;
    for (const auto& p : paths) {
        std::error_code ec;
        bytes += std::filesystem::is_regular_file(p, ec) ? std::filesystem::file_size(p, ec) : kAllArgsBelowBytes;
    }
    traces::ReadOptions options;
    options.keep_all_args = bytes < kAllArgsBelowBytes;
    return std::make_shared<const traces::TraceModel>(traces::read_traces(paths, options));
}

std::string_view span_arg(const traces::TraceModel& model, const traces::Span& span, std::string_view key) {
    return model.arg(span, key);
}

}  // namespace dtsim::gui
