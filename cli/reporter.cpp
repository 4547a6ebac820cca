#include "reporter.hpp"

#include "dtsim/common/error.hpp"

#include <fmt/format.h>

#include <cstdio>

namespace dtsim::cli {

void Reporter::add_option(CLI::App& cmd, std::vector<std::string> choices, const std::string& help) {
    DTSIM_ASSERT(!choices.empty(), "a command offers at least one format");
    chosen_ = choices.front();
    cmd.add_option("--format", chosen_, help)->check(CLI::IsMember(std::move(choices)))->capture_default_str();
}

Reporter::Format Reporter::format() const {
    if (chosen_ == "json") return Format::json;
    if (chosen_ == "csv") return Format::csv;
    return Format::text;
}

void Reporter::print(const Views& views) const {
    const auto& view = format() == Format::json ? views.json : format() == Format::csv ? views.csv : views.text;
    DTSIM_ASSERT(static_cast<bool>(view), "the command offers --format " + chosen_ + " but has no view for it");
    std::string out = view();
    if (format() == Format::json && (out.empty() || out.back() != '\n')) out += '\n';
    fmt::print("{}", out);
    std::fflush(stdout);
}

void Reporter::note(std::string_view line) const {
    fmt::print(text() ? stdout : stderr, "{}\n", line);
}

}  // namespace dtsim::cli
