#include "dtsim/common/registry.hpp"

#include <algorithm>

namespace dtsim {
namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diag = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diag = up;
        }
    }
    return row[b.size()];
}

}  // namespace

std::string unknown_name_message(std::string_view what, std::string_view name, const std::vector<std::string>& valid) {
    std::string suggestion;
    // Suggest only close matches: a few edits, or one name a prefix of the other.
    std::size_t best = std::max<std::size_t>(3, name.size() / 3 + 1);
    for (const auto& v : valid) {
        const bool prefix = name.size() >= 3 && (v.starts_with(name) || name.starts_with(v));
        std::size_t d = edit_distance(name, v);
        if (prefix) d = std::min<std::size_t>(d, 2);
        if (d < best) {
            best = d;
            suggestion = v;
        }
    }
    std::string msg = fmt::format("unknown {} '{}'", what, name);
    if (!suggestion.empty()) msg += fmt::format("; did you mean '{}'?", suggestion);
    msg += fmt::format(" Valid: {}", fmt::join(valid, ", "));
    return msg;
}

}  // namespace dtsim
