#include "kineto_args.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace dtsim::traces::detail {

bool starts_with(std::string_view s, std::string_view prefix) {
    return s.substr(0, prefix.size()) == prefix;
}

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

std::optional<std::int64_t> profiler_step(std::string_view name) {
    constexpr std::string_view prefix = "ProfilerStep#";
    if (!starts_with(name, prefix)) return std::nullopt;
    std::int64_t n = 0;
    const char* b = name.data() + prefix.size();
    const auto r = std::from_chars(b, name.data() + name.size(), n);
    if (r.ec != std::errc{} || r.ptr == b) return std::nullopt;
    return n;
}

std::string first_input_type(std::string_view text) {
    if (text.empty()) return {};
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_array() || j.empty() || !j[0].is_string()) return {};
    return j[0].get<std::string>();
}

std::vector<std::vector<std::int64_t>> input_dims(std::string_view text) {
    std::vector<std::vector<std::int64_t>> out;
    if (text.empty()) return out;
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_array()) return out;
    for (const auto& input : j) {
        std::vector<std::int64_t>& dims = out.emplace_back();
        if (!input.is_array()) continue;
        for (const auto& d : input) {
            if (!d.is_number_integer()) {
                dims.clear();
                break;
            }
            dims.push_back(d.get<std::int64_t>());
        }
    }
    return out;
}

}  // namespace dtsim::traces::detail
