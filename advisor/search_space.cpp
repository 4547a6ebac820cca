#include "dtsim/advisor/search_space.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/host_memory.hpp"
#include "dtsim/common/json_io.hpp"
#include "dtsim/common/registry.hpp"
#include "dtsim/sim/lightning_names.hpp"
#include "dtsim/sim/nccl_model.hpp"
#include "dtsim/sim/strategy.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

namespace dtsim::advisor {
namespace {

constexpr std::string_view kCommonAxes[] = {"strategy", "micro_batch", "grad_accum",
                                            "seq_len",  "precision",   "activation_checkpointing"};

std::string trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return std::string(s);
}

// Upper bounds of the common axes: Config::validate()'s, with its reasons.
struct IntAxis {
    std::string_view name;
    std::int64_t max;
    std::string_view why_max;
};
constexpr IntAxis kIntAxes[] = {
    {"micro_batch", sim::Config::kMaxMicroBatch, "a larger micro-batch fits in no device's memory"},
    {"grad_accum", sim::Config::kMaxGradAccum, "more micro-steps than any training step runs"},
    {"seq_len", sim::Config::kMaxSeqLen, "longer than any model's context"},
};

// Values per axis, and configurations per space: a 10,000-configuration sweep
// takes 2 s (bench/results/sweep_speed.md), so a million is minutes of work and
// gigabytes of results; a larger space is a mistake in the spec.
constexpr std::size_t kMaxValuesPerAxis = 10000;
constexpr std::size_t kMaxConfigurations = 1000000;
// Memory a sweep holds per configuration: the Candidate, its SweepResult and
// the output text, all held at once. Measured 3,678 bytes: the peak RSS of a
// 250,000-configuration `dtsim sweep --model gpt2 --format json` (1,114 MiB)
// less that of a 1-configuration one (237 MiB), over the count (2026-11-25,
// this repository's development machine, GCC 12 -O3); 4 KiB leaves a margin
// for longer knob strings.
constexpr std::uint64_t kBytesPerConfiguration = 4096;

std::int64_t parse_int(const std::string& axis, const std::string& v, std::int64_t min_value) {
    std::int64_t x = 0;
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    const IntAxis* bound = nullptr;
    for (const auto& a : kIntAxes)
        if (a.name == axis) bound = &a;
    if (ec != std::errc{} || ptr != v.data() + v.size() || x < min_value || (bound && x > bound->max)) {
        if (bound)
            throw ConfigError(fmt::format("axis '{}': value '{}' is not an integer from {} to {} ({})", axis, v,
                                          min_value, bound->max, bound->why_max));
        throw ConfigError(fmt::format("axis '{}': value '{}' is not an integer >= {}", axis, v, min_value));
    }
    return x;
}

bool parse_flag(const std::string& axis, const std::string& v) {
    if (v == "true" || v == "on" || v == "1" || v == "yes") return true;
    if (v == "false" || v == "off" || v == "0" || v == "no") return false;
    throw ConfigError(fmt::format("axis '{}': value '{}' is not true/false (or on/off)", axis, v));
}

// The dtsim strategy a name stands for (Lightning names resolved) and its knobs.
struct ResolvedStrategy {
    std::string name;
    std::vector<std::pair<std::string, std::string>> knobs;  // the Lightning name's
    const sim::Strategy* strategy;
};

ResolvedStrategy resolve(const std::string& name) {
    sim::Config c;
    c.strategy = name;
    sim::resolve_lightning_name(c);
    const sim::Strategy* s = nullptr;
    if (const auto* e = sim::strategies().find_or_null(c.strategy)) {
        s = &e->value;
    } else {
        std::vector<std::string> valid = sim::strategies().names();
        for (const auto& l : sim::lightning_strategies()) valid.push_back(l.name);
        throw ConfigError("axis 'strategy': " + unknown_name_message("strategy", name, valid));
    }
    return {c.strategy, c.knobs, s};
}

bool declares(const sim::Strategy& s, const std::string& knob) {
    return std::any_of(s.knobs.begin(), s.knobs.end(), [&](const sim::KnobSpec& k) { return k.name == knob; });
}

void set_knob(std::vector<std::pair<std::string, std::string>>& knobs, const std::string& name,
              const std::string& value) {
    for (auto& kv : knobs)
        if (kv.first == name) {
            kv.second = value;
            return;
        }
    knobs.emplace_back(name, value);
}

void apply_common(sim::Config& c, const std::string& axis, const std::string& v) {
    if (axis == "micro_batch")
        c.micro_batch = parse_int(axis, v, 1);
    else if (axis == "grad_accum")
        c.grad_accum = static_cast<int>(parse_int(axis, v, 1));
    else if (axis == "seq_len")
        c.seq_len = parse_int(axis, v, 1);
    else if (axis == "precision")
        c.precision = sim::precision_from_string(v);
    else if (axis == "activation_checkpointing") {
        // true/false (or 1/0), N >= 2: every N-th block (selective AC by layer),
        // or op: op-level selective AC in every block.
        const bool every = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos && v != "0" && v != "1";
        c.ac_op = v == "op";
        c.activation_checkpointing = every || c.ac_op || parse_flag(axis, v);
        // Past the bound, Config::validate names it (as --ac-freq).
        c.ac_freq = every ? static_cast<int>(std::min<std::int64_t>(parse_int(axis, v, 2), sim::Config::kMaxAcFreq + 1))
                          : 1;
    }
}

const Axis* find_axis(const SearchSpace& space, std::string_view name) {
    for (const auto& a : space.axes)
        if (a.name == name) return &a;
    return nullptr;
}

// Why `value` is not valid for `spec`, or nothing when it is (the checks of
// sim::Knobs, made here so that an axis value is refused naming its axis).
std::optional<std::string> knob_value_error(const sim::KnobSpec& spec, const std::string& value) {
    switch (spec.type) {
        case sim::KnobType::boolean:
            if (value == "true" || value == "True" || value == "1" || value == "false" || value == "False" ||
                value == "0")
                return std::nullopt;
            return "expected true or false";
        case sim::KnobType::number: {
            if (value == "auto" && spec.default_value == "auto") return std::nullopt;
            double x = 0;
            auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
            if (ec == std::errc::result_out_of_range) return "expected a finite number (this one overflows a double)";
            if (ec != std::errc{} || ptr != value.data() + value.size()) return "expected a number";
            if (!std::isfinite(x)) return "expected a finite number";
            if (x > spec.max_value)
                return fmt::format("must be <= {:g} (larger sizes overflow the plan's 64-bit byte counts)",
                                   spec.max_value);
            if (x < spec.min_value || (spec.min_exclusive && x == spec.min_value))
                return fmt::format("must be {} {:g}", spec.min_exclusive ? ">" : ">=", spec.min_value);
            return std::nullopt;
        }
        case sim::KnobType::choice:
            if (std::find(spec.choices.begin(), spec.choices.end(), value) != spec.choices.end()) return std::nullopt;
            return unknown_name_message("value", value, spec.choices);
        case sim::KnobType::class_names:  // the form here; lowering checks it names the model's block class
            if (value == spec.default_value || sim::parse_class_names(value)) return std::nullopt;
            return "expected a class name, e.g. LlamaDecoderLayer, or several separated by commas";
    }
    return std::nullopt;
}

bool is_knob_of_any_strategy(const std::string& name) {
    for (const auto& s : sim::strategies().names())
        for (const auto& spec : sim::strategies().find(s).value.knobs)
            if (spec.name == name) return true;
    return false;
}

// An NCCL variable axis's value: "default" removes the variable.
void set_env(std::vector<std::pair<std::string, std::string>>& env, const std::string& name, const std::string& value) {
    std::erase_if(env, [&](const auto& kv) { return kv.first == name; });
    if (value != "default") env.emplace_back(name, value);
}

// Checks one value of an axis; throws ConfigError "axis 'x': value 'v' ...".
void check_axis_value(const std::string& axis, const std::string& value) {
    if (axis == "strategy") {
        resolve(value);
        return;
    }
    if (is_env_axis(axis)) {
        if (value == "default") return;
        try {
            sim::parse_nccl_env({{axis, value}});
        } catch (const ConfigError& e) {
            throw ConfigError(fmt::format("axis '{}': {} (or default: unset)", axis, e.what()));
        }
        return;
    }
    if (is_common_axis(axis)) {
        sim::Config probe;
        try {
            apply_common(probe, axis, value);
        } catch (const ConfigError& e) {
            if (std::string_view(e.what()).starts_with("axis ")) throw;
            throw ConfigError(fmt::format("axis '{}': {}", axis, e.what()));
        }
        return;
    }
    if (!is_knob_of_any_strategy(axis))
        throw ConfigError(fmt::format("axis '{}' is neither a common axis ({}) nor a knob of any strategy; see `dtsim "
                                      "simulate --strategy S --set help=1`",
                                      axis, fmt::join(std::begin(kCommonAxes), std::end(kCommonAxes), ", ")));
    std::optional<std::string> error;
    bool declared = false;
    for (const auto& name : sim::strategies().names())
        for (const auto& spec : sim::strategies().find(name).value.knobs)
            if (spec.name == axis) {
                auto e = knob_value_error(spec, value);
                if (!e) return;  // valid for at least one strategy that has the knob
                if (!declared) error = e;
                declared = true;
            }
    throw ConfigError(fmt::format("axis '{}': value '{}': {}", axis, value, *error));
}

}  // namespace

bool is_common_axis(std::string_view name) {
    return std::find(std::begin(kCommonAxes), std::end(kCommonAxes), name) != std::end(kCommonAxes);
}

bool is_env_axis(std::string_view name) {
    return name.starts_with("NCCL_");
}

Axis parse_axis(std::string_view spec) {
    const auto eq = spec.find('=');
    if (eq == std::string_view::npos || eq == 0)
        throw ConfigError(fmt::format("--axis {}: expected key=v1,v2,... e.g. --axis micro_batch=1,2,4", spec));
    Axis axis{trim(spec.substr(0, eq)), {}};
    std::string_view rest = spec.substr(eq + 1);
    while (true) {
        const auto comma = rest.find(',');
        std::string v = trim(rest.substr(0, comma));
        if (!v.empty()) axis.values.push_back(std::move(v));
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
    }
    if (axis.values.empty()) throw ConfigError(fmt::format("axis '{}' has no values", axis.name));
    return axis;
}

void add_axis(SearchSpace& space, Axis axis) {
    if (axis.values.empty()) throw ConfigError(fmt::format("axis '{}' has no values", axis.name));
    if (axis.values.size() > kMaxValuesPerAxis)
        throw ConfigError(fmt::format("axis '{}' has {} values; at most {} (a sweep of 10,000 configurations takes "
                                      "seconds; millions take hours)",
                                      axis.name, axis.values.size(), kMaxValuesPerAxis));
    for (const auto& v : axis.values) check_axis_value(axis.name, v);
    if (find_axis(space, axis.name))
        throw ConfigError(fmt::format("axis '{}' is given twice; give all its values in one axis", axis.name));
    for (std::size_t i = 0; i < axis.values.size(); ++i)
        for (std::size_t j = 0; j < i; ++j)
            if (axis.values[i] == axis.values[j])
                throw ConfigError(fmt::format("axis '{}' lists '{}' twice", axis.name, axis.values[i]));
    space.axes.push_back(std::move(axis));
}

SearchSpace parse_axes(const std::vector<std::string>& specs) {
    SearchSpace space;
    for (const auto& s : specs) add_axis(space, parse_axis(s));
    return space;
}

SearchSpace parse_space_json(const std::string& text, const std::string& file_name) {
    check_json_text(text, file_name, "a search space (a JSON object of axes)");
    nlohmann::ordered_json j;
    try {
        j = nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw_json_syntax_error(e, text, file_name);
    }
    if (!j.is_object()) throw ParseError(file_name, "", "expected an object of axes, e.g. {\"micro_batch\": [1, 2]}");
    auto values_of = [&](const nlohmann::ordered_json& v, const std::string& field) {
        if (!v.is_array() || v.empty())
            throw ParseError(file_name, field, "expected a non-empty array of values, e.g. [1, 2, 4]");
        if (v.size() > kMaxValuesPerAxis)
            throw ParseError(file_name, field,
                             fmt::format("{} values; expected at most {} (a sweep of 10,000 configurations takes "
                                         "seconds; millions take hours)",
                                         v.size(), kMaxValuesPerAxis));
        Axis axis;
        for (std::size_t i = 0; i < v.size(); ++i) {
            const auto& x = v[i];
            const std::string at = fmt::format("{}/{}", field, i);
            if (x.is_string())
                axis.values.push_back(x.get<std::string>());
            else if (x.is_boolean())
                axis.values.push_back(x.get<bool>() ? "true" : "false");
            else if (x.is_number_unsigned())
                axis.values.push_back(std::to_string(x.get<std::uint64_t>()));
            else if (x.is_number_integer())
                axis.values.push_back(std::to_string(x.get<std::int64_t>()));
            else if (x.is_number() && std::isfinite(x.get<double>()))
                axis.values.push_back(fmt::format("{}", x.get<double>()));
            else if (x.is_number())
                throw ParseError(file_name, at, fmt::format("expected a finite number, found {}", json_excerpt(x)));
            else
                throw ParseError(file_name, at, "expected a string, number or boolean");
            try {
                check_axis_value(field.substr(field.rfind('/') + 1), axis.values.back());
            } catch (const ConfigError& e) {
                throw ParseError(file_name, at, e.what());
            }
        }
        return axis;
    };
    SearchSpace space;
    auto add = [&](Axis axis, const std::string& field) {
        try {
            add_axis(space, std::move(axis));
        } catch (const ConfigError& e) {
            throw ParseError(file_name, field, e.what());
        }
    };
    for (const auto& [key, value] : j.items()) {
        const std::string field = "/" + key;
        if (key == "global_batch") {
            constexpr std::int64_t kMax = sim::Config::kMaxMicroBatch * sim::Config::kMaxGradAccum;
            // Non-negative integers parse as unsigned, negative ones as signed.
            const bool valid = value.is_number_unsigned()
                                   ? value.get<std::uint64_t>() >= 1 && value.get<std::uint64_t>() <= kMax
                                   : false;
            if (!valid)
                throw ParseError(file_name, field,
                                 fmt::format("expected a positive integer up to {} (the largest micro-batch x "
                                             "accumulation), found {}",
                                             kMax, json_excerpt(value)));
            space.global_batch = value.get<std::int64_t>();
        } else if (key == "knobs") {
            if (!value.is_object())
                throw ParseError(file_name, field, "expected an object of knob axes, e.g. {\"bucket_cap_mb\": [25]}");
            for (const auto& [knob, kv] : value.items()) {
                if (!is_knob_of_any_strategy(knob))
                    throw ParseError(file_name, field + "/" + knob,
                                     "not a knob of any strategy; see `dtsim simulate --strategy S --set help=1`");
                Axis a = values_of(kv, field + "/" + knob);
                a.name = knob;
                add(std::move(a), field + "/" + knob);
            }
        } else if (is_common_axis(key) || is_env_axis(key)) {
            Axis a = values_of(value, field);
            a.name = key;
            add(std::move(a), field);
        } else {
            throw ParseError(file_name, field,
                             fmt::format("unknown axis; valid: {}, global_batch, knobs, or an NCCL variable",
                                         fmt::join(std::begin(kCommonAxes), std::end(kCommonAxes), ", ")));
        }
    }
    return space;
}

SearchSpace load_space(const std::string& path) {
    return parse_space_json(read_config_file(path), path);
}

std::string Candidate::label() const {
    std::string out = strategy;
    for (const auto& [k, v] : settings) {
        if (k == "strategy" || v.empty()) continue;
        out += fmt::format(" {}={}", k, v);
    }
    return out;
}

std::vector<Candidate> enumerate(const SearchSpace& space, const sim::Config& base) {
    std::vector<std::string> strategies = {base.strategy};
    if (const Axis* a = find_axis(space, "strategy")) strategies = a->values;
    if (space.axes.empty() && !space.global_batch)
        throw ConfigError(
            "the search space is empty: give at least one --axis (e.g. --axis micro_batch=1,2,4) or --space");
    if (space.global_batch && find_axis(space, "grad_accum"))
        throw ConfigError("axis 'grad_accum' contradicts --global-batch, which derives grad_accum; drop one of them");

    std::vector<ResolvedStrategy> resolved;
    for (const auto& s : strategies) resolved.push_back(resolve(s));
    // The product of the axes' sizes, stopping once past the bound so that it cannot overflow.
    std::size_t total = strategies.size();
    for (const auto& axis : space.axes)
        if (axis.name != "strategy" && total <= kMaxConfigurations) total *= axis.values.size();
    if (total > kMaxConfigurations)
        throw ConfigError(fmt::format("the search space has more than {} configurations (a sweep of 10,000 takes "
                                      "seconds; millions take hours): give fewer values per axis",
                                      kMaxConfigurations));
    std::string shape = fmt::format("{} strateg{}", strategies.size(), strategies.size() == 1 ? "y" : "ies");
    for (const auto& axis : space.axes)
        if (axis.name != "strategy") shape += fmt::format(" x {} {}", axis.values.size(), axis.name);
    check_fits_host_memory(saturating_mul(total, kBytesPerConfiguration), 0.5,
                           fmt::format("this search space has {} configurations ({}); holding them and their results",
                                       total, shape),
                           "narrow an axis or split the sweep into several runs");
    // A knob axis no strategy of the space declares is a mistake, not a skip.
    for (const auto& axis : space.axes) {
        if (is_env_axis(axis.name)) continue;  // checked value by value when added
        if (is_common_axis(axis.name)) {
            // Validate the values up front, naming the axis.
            sim::Config probe = base;
            for (const auto& v : axis.values) apply_common(probe, axis.name, v);
            continue;
        }
        const bool any = std::any_of(resolved.begin(), resolved.end(),
                                     [&](const ResolvedStrategy& r) { return declares(*r.strategy, axis.name); });
        if (!any)
            throw ConfigError(
                fmt::format("axis '{}' is not a knob of any strategy in the space ({}); see `dtsim "
                            "simulate --strategy S --set help=1`",
                            axis.name, fmt::join(strategies, ", ")));
    }

    std::vector<Candidate> out;
    const int world = base.topology.world_size();
    for (std::size_t si = 0; si < strategies.size(); ++si) {
        const ResolvedStrategy& rs = resolved[si];
        std::vector<const Axis*> axes;  // the axes that vary for this strategy
        for (const auto& axis : space.axes)
            if (axis.name != "strategy" &&
                (is_common_axis(axis.name) || is_env_axis(axis.name) || declares(*rs.strategy, axis.name)))
                axes.push_back(&axis);
        std::vector<std::size_t> pos(axes.size(), 0);
        while (true) {
            Candidate c;
            c.strategy = strategies[si];
            c.config = base;
            c.config.strategy = rs.name;
            c.config.knobs = rs.knobs;
            // The base's own --set knobs, where this strategy has them.
            for (const auto& [k, v] : base.knobs)
                if (declares(*rs.strategy, k)) set_knob(c.config.knobs, k, v);
            for (std::size_t i = 0; i < axes.size(); ++i) {
                const std::string& v = axes[i]->values[pos[i]];
                if (is_common_axis(axes[i]->name))
                    apply_common(c.config, axes[i]->name, v);
                else if (is_env_axis(axes[i]->name))
                    set_env(c.config.env, axes[i]->name, v);
                else
                    set_knob(c.config.knobs, axes[i]->name, v);
            }
            // Lightning's activation_checkpointing_policy among the knobs fixes full AC on every block.
            const bool checkpointing = c.config.activation_checkpointing;
            try {
                sim::resolve_lightning_name(c.config);
            } catch (const ConfigError& e) {
                c.skip_reason = e.what();
            }
            if (!checkpointing && c.config.activation_checkpointing && c.skip_reason.empty() &&
                find_axis(space, "activation_checkpointing"))
                c.skip_reason =
                    "activation_checkpointing_policy checkpoints every block, so not activation_checkpointing=false";
            if (space.global_batch) {
                const std::int64_t per_step = c.config.micro_batch * world;
                if (*space.global_batch % per_step != 0)
                    c.skip_reason = fmt::format("global batch {} is not a multiple of micro_batch {} x {} GPUs",
                                                *space.global_batch, c.config.micro_batch, world);
                else
                    c.config.grad_accum = static_cast<int>(*space.global_batch / per_step);
            }
            for (const auto& axis : space.axes) {
                std::string v;
                if (axis.name == "strategy") {
                    v = strategies[si];
                } else {
                    for (std::size_t i = 0; i < axes.size(); ++i)
                        if (axes[i] == &axis) v = axis.values[pos[i]];
                }
                c.settings.emplace_back(axis.name, v);
            }
            if (space.global_batch && !find_axis(space, "grad_accum"))
                c.settings.emplace_back("grad_accum", c.skip_reason.empty() ? std::to_string(c.config.grad_accum) : "");
            c.index = out.size();
            out.push_back(std::move(c));
            // Odometer: the last axis varies fastest.
            bool done = true;
            for (std::size_t i = axes.size(); i-- > 0;) {
                if (++pos[i] < axes[i]->values.size()) {
                    done = false;
                    break;
                }
                pos[i] = 0;
            }
            if (done) break;
        }
    }
    return out;
}

SearchSpace default_space(const sim::Config& base, std::optional<std::int64_t> global_batch,
                          const calib::Calibration& calibration) {
    SearchSpace space;
    space.global_batch = global_batch;
    add_axis(space, {"strategy", {"ddp", "fsdp", "deepspeed"}});
    std::vector<std::string> micro;
    const std::int64_t world = base.topology.world_size();
    for (std::int64_t mb = 1; mb <= 16; mb *= 2) {
        if (global_batch && (*global_batch % (mb * world) != 0)) continue;
        micro.push_back(std::to_string(mb));
    }
    if (micro.empty())
        throw ConfigError(fmt::format("--global-batch {} is not a multiple of the {} GPUs: no micro-batch fits it",
                                      *global_batch, world));
    add_axis(space, {"micro_batch", micro});
    // Off, every block, every 2nd, or op-level in every block (the selective
    // forms are often the fastest that fit).
    add_axis(space, {"activation_checkpointing", {"false", "true", "2", "op"}});
    add_axis(space, {"bucket_cap_mb", {"25", "100"}});
    add_axis(space, {"gradient_as_bucket_view", {"false", "true"}});
    std::vector<std::string> sharding = {"FULL_SHARD", "SHARD_GRAD_OP"};
    if (base.topology.nodes > 1) sharding.push_back("HYBRID_SHARD");
    add_axis(space, {"sharding_strategy", sharding});
    add_axis(space, {"stage", {"1", "2", "3"}});
    // Offload is slower wherever the model fits without it, so it wins only
    // where nothing else fits. Precision, sequence length and the attention
    // kernel stay the user's: they change the numerics or the data, not just
    // the speed.
    add_axis(space, {"offload_optimizer", {"none", "cpu"}});
    add_axis(space, {"cpu_offload", {"false", "true"}});
    // TCP between nodes: the NIC's socket defaults, or enough flows to fill it
    // (Lightning's DDP guide sets 2 threads x 4 sockets for such clusters).
    // Values the user set with --env stay theirs.
    const calib::NcclSocketNet& net = calibration.nccl.socket;
    const auto user_set = [&](std::string_view name) {
        return std::any_of(base.env.begin(), base.env.end(), [&](const auto& kv) { return kv.first == name; });
    };
    if (calibration.nccl.present() && net.present() && base.topology.nodes > 1 && !user_set("NCCL_SOCKET_NTHREADS") &&
        !user_set("NCCL_NSOCKS_PERTHREAD")) {
        const auto [threads, socks] = sim::nccl_socket_suggestion(net);
        const sim::NcclSockets now = sim::nccl_sockets(net, sim::parse_nccl_env(base.env));
        if (now.threads * now.socks_per_thread < threads * socks) {
            add_axis(space, {"NCCL_SOCKET_NTHREADS", {"default", std::to_string(threads)}});
            add_axis(space, {"NCCL_NSOCKS_PERTHREAD", {"default", std::to_string(socks)}});
        }
    }
    return space;
}

}  // namespace dtsim::advisor
