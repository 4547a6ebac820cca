// Strategy knobs: declared by each strategy (name, type, default, help), given
// by the user as --set key=value, validated once, then read with typed getters.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dtsim::sim {

// class_names: Python classes, as a policy names them ("LlamaDecoderLayer",
// "transformers.models.llama.modeling_llama.LlamaDecoderLayer", or several
// joined by commas); stored as their last dotted parts, comma-joined.
enum class KnobType { boolean, number, choice, class_names };

// A class_names value in its stored form ("a.b.C, D" -> "C,D"); nullopt for
// anything that is not a comma-separated list of (dotted) Python names.
std::optional<std::string> parse_class_names(const std::string& value);

struct KnobSpec {
    std::string name;  // torch / DeepSpeed name, e.g. "bucket_cap_mb"
    KnobType type = KnobType::number;
    std::string default_value;  // as text; "auto" allowed where the strategy derives it
    std::string description;
    std::vector<std::string> choices = {};  // KnobType::choice
    double min_value = 0;              // KnobType::number: lower bound
    bool min_exclusive = false;        // the bound itself is invalid (sizes must be > 0)
    // "key=value" or "key=a|b": the knob means something only when knob `key`
    // has one of those values (a hook's knobs, offload settings). Setting it
    // otherwise is an error.
    std::string applies_when = {};
    // KnobType::number: upper bound. Sizes in MiB become bytes in int64 (2^63
    // bytes is 8.8e12 MiB), so 1e12 keeps every product in range; no size or
    // count a strategy takes comes near it.
    double max_value = 1e12;
};

class Knobs {
public:
    // Validates `given` against `specs`: unknown names list the valid knobs,
    // values must parse as their type. Throws ConfigError.
    Knobs(const std::string& strategy, const std::vector<KnobSpec>& specs,
          const std::vector<std::pair<std::string, std::string>>& given);

    bool is_set(const std::string& name) const;   // given explicitly by the user
    bool applies(const std::string& name) const;  // its applies_when condition holds
    bool boolean(const std::string& name) const;
    double number(const std::string& name) const;
    const std::string& text(const std::string& name) const;  // raw value (given or default)

    // All knob values in declaration order, for reports.
    const std::vector<std::pair<std::string, std::string>>& values() const { return values_; }

private:
    const std::pair<std::string, std::string>& find(const std::string& name) const;
    std::vector<std::pair<std::string, std::string>> values_;
    std::vector<std::string> explicitly_set_;
    std::vector<std::pair<std::string, std::string>> conditions_;  // knob -> "key=value"
};

}  // namespace dtsim::sim
