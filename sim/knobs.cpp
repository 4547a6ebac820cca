#include "dtsim/sim/knobs.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>

namespace dtsim::sim {
namespace {

bool parse_bool(const std::string& s, bool& out) {
    if (s == "true" || s == "True" || s == "1") return out = true, true;
    if (s == "false" || s == "False" || s == "0") return out = false, true;
    return false;
}

bool parse_number(const std::string& s, double& out) {
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && ptr == s.data() + s.size();
}

// torch's own spellings of a choice, pasted verbatim: a module path
// ("default_hooks.fp16_compress_hook", "ShardingStrategy.FULL_SHARD") and the
// "_hook" and "_compress_wrapper" suffixes of DDP's communication hooks name the
// plain choice ("fp16_compress", "FULL_SHARD", "fp16"). Anything else is
// returned as given, for the caller's error.
std::string choice_from_torch_spelling(const std::string& value, const std::vector<std::string>& choices) {
    auto known = [&](const std::string& v) { return std::find(choices.begin(), choices.end(), v) != choices.end(); };
    if (known(value)) return value;
    const std::string last = value.substr(value.rfind('.') + 1);  // npos + 1 == 0: the whole value
    for (const std::string suffix : {"", "_hook", "_compress_wrapper"})
        if (last.size() > suffix.size() && last.ends_with(suffix)) {
            const std::string plain = last.substr(0, last.size() - suffix.size());
            if (known(plain)) return plain;
        }
    return value;
}

}  // namespace

// "a.b.C, D" -> "C,D"; an empty optional for anything that is not a comma-separated list of (dotted) Python names.
std::optional<std::string> parse_class_names(const std::string& value) {
    std::string out;
    std::size_t begin = 0;
    while (begin <= value.size()) {
        const std::size_t comma = std::min(value.find(',', begin), value.size());
        std::string part = value.substr(begin, comma - begin);
        part.erase(0, part.find_first_not_of(' '));
        part.erase(part.find_last_not_of(' ') + 1);
        bool ok = !part.empty() && part.front() != '.' && part.back() != '.';
        for (std::size_t i = 0; ok && i < part.size(); ++i) {
            const auto c = static_cast<unsigned char>(part[i]);
            const bool starts = i == 0 || part[i - 1] == '.';
            ok = std::isalpha(c) || c == '_' || (!starts && (std::isdigit(c) || c == '.'));
        }
        if (!ok) return std::nullopt;
        if (!out.empty()) out += ',';
        out.append(part, part.rfind('.') + 1);
        begin = comma + 1;
    }
    return out;
}

Knobs::Knobs(const std::string& strategy, const std::vector<KnobSpec>& specs,
             const std::vector<std::pair<std::string, std::string>>& given) {
    for (const auto& s : specs) {
        values_.emplace_back(s.name, s.default_value);
        if (!s.applies_when.empty()) conditions_.emplace_back(s.name, s.applies_when);
    }
    for (const auto& [name, given_value] : given) {
        std::string value = given_value;
        // An explicit capture: clang 14 (the fuzz build) cannot capture a structured binding.
        auto spec = std::find_if(specs.begin(), specs.end(), [&n = name](const KnobSpec& s) { return s.name == n; });
        if (spec == specs.end()) {
            std::vector<std::string> names;
            for (const auto& s : specs) names.push_back(s.name);
            throw ConfigError(unknown_name_message("knob", name, names) +
                              fmt::format(" (strategy '{}'; `--set help=1` describes them)", strategy));
        }
        switch (spec->type) {
            case KnobType::boolean: {
                bool b;
                if (!parse_bool(value, b))
                    throw ConfigError(fmt::format("--set {}={}: expected true or false", name, value));
                break;
            }
            case KnobType::number: {
                double x;
                if (value == "auto" && spec->default_value == "auto") break;
                if (!parse_number(value, x)) {
                    double ignored = 0;
                    const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), ignored);
                    if (ec == std::errc::result_out_of_range && ptr == value.data() + value.size())
                        throw ConfigError(fmt::format("--set {}={}: expected a finite number (this one overflows a "
                                                      "double)", name, value));
                    throw ConfigError(fmt::format("--set {}={}: expected a number", name, value));
                }
                if (!std::isfinite(x))
                    throw ConfigError(fmt::format("--set {}={}: expected a finite number", name, value));
                if (x > spec->max_value)
                    throw ConfigError(fmt::format("--set {}={}: must be <= {:g} (larger sizes overflow the plan's "
                                                  "64-bit byte counts)",
                                                  name, value, spec->max_value));
                if (x < spec->min_value || (spec->min_exclusive && x == spec->min_value))
                    throw ConfigError(fmt::format("--set {}={}: must be {} {}", name, value,
                                                  spec->min_exclusive ? ">" : ">=", spec->min_value));
                break;
            }
            case KnobType::choice:
                value = choice_from_torch_spelling(value, spec->choices);
                if (std::find(spec->choices.begin(), spec->choices.end(), value) == spec->choices.end())
                    throw ConfigError(fmt::format("--set {}={}: ", name, value) +
                                      unknown_name_message("value", value, spec->choices));
                break;
            case KnobType::class_names:
                if (value == spec->default_value || (value == "None" && spec->default_value == "none")) {
                    value = spec->default_value;
                    break;
                }
                if (auto names = parse_class_names(value)) {
                    value = *names;
                    break;
                }
                throw ConfigError(
                    fmt::format("--set {}={}: expected a class name, e.g. LlamaDecoderLayer, or several "
                                "separated by commas",
                                name, value));
        }
        for (auto& v : values_)
            if (v.first == name) v.second = value;
        explicitly_set_.push_back(name);
    }
    for (const auto& name : explicitly_set_)
        if (!applies(name)) {
            const std::string& cond = std::find_if(conditions_.begin(), conditions_.end(), [&](const auto& c) {
                                          return c.first == name;
                                      })->second;
            const std::string key = cond.substr(0, cond.find('='));
            throw ConfigError(fmt::format("--set {}={}: this knob applies only with {} ({} is {})", name, text(name),
                                          cond, key, text(key)));
        }
}

bool Knobs::applies(const std::string& name) const {
    for (const auto& [knob, cond] : conditions_)
        if (knob == name) {
            // "key=a|b": the knob applies when `key` is any of the listed values.
            const auto eq = cond.find('=');
            const std::string_view wanted = text(cond.substr(0, eq));
            std::string_view values = std::string_view(cond).substr(eq + 1);
            while (!values.empty()) {
                const auto bar = values.find('|');
                if (values.substr(0, bar) == wanted) return true;
                if (bar == std::string_view::npos) break;
                values.remove_prefix(bar + 1);
            }
            return false;
        }
    return true;
}

const std::pair<std::string, std::string>& Knobs::find(const std::string& name) const {
    for (const auto& v : values_)
        if (v.first == name) return v;
    DTSIM_ASSERT(false, "strategy read an undeclared knob " + name);
}

bool Knobs::is_set(const std::string& name) const {
    return std::find(explicitly_set_.begin(), explicitly_set_.end(), name) != explicitly_set_.end();
}

bool Knobs::boolean(const std::string& name) const {
    bool b = false;
    DTSIM_ASSERT(parse_bool(find(name).second, b), "knob " + name + " is not a boolean");
    return b;
}

double Knobs::number(const std::string& name) const {
    double x = 0;
    DTSIM_ASSERT(parse_number(find(name).second, x), "knob " + name + " is not a number");
    return x;
}

const std::string& Knobs::text(const std::string& name) const {
    return find(name).second;
}

}  // namespace dtsim::sim
