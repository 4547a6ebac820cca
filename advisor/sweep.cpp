#include "dtsim/advisor/sweep.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/json_io.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/strategy.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <exception>
#include <fstream>
#include <map>
#include <memory>
#include <tuple>

namespace dtsim::advisor {
namespace {

using WorkloadKey = std::tuple<std::string, std::int64_t, std::int64_t, int, int, int>;

// What build_workload reads: the strategy matters only through the dtypes its
// autocast gives the model.
WorkloadKey key_of(const sim::Config& c) {
    int autocast = -1;  // a config whose knobs do not parse fails in simulate_outcome, with its reason
    try {
        autocast = static_cast<int>(sim::workload_autocast(c));
    } catch (const std::exception&) {
    }
    return {c.model, c.micro_batch, c.seq_len, static_cast<int>(c.precision), static_cast<int>(c.attention), autocast};
}

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string out = "\"";
    for (char ch : s) {
        if (ch == '"') out += '"';
        out += ch;
    }
    return out + "\"";
}

// The axis columns: every setting name in order of first appearance.
std::vector<std::string> setting_columns(const std::vector<SweepResult>& results) {
    std::vector<std::string> cols;
    for (const auto& r : results)
        for (const auto& [k, v] : r.candidate.settings)
            if (std::find(cols.begin(), cols.end(), k) == cols.end()) cols.push_back(k);
    return cols;
}

std::string setting(const Candidate& c, const std::string& name) {
    if (name == "strategy") return c.strategy;
    for (const auto& [k, v] : c.settings)
        if (k == name) return v;
    return "";
}

}  // namespace

std::string gib(std::int64_t bytes) {
    return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30));
}

Outcome simulate_outcome(const sim::Config& config, std::shared_ptr<const models::Workload>& workload,
                         const calib::Calibration& calibration) {
    Outcome r;
    try {
        config.validate();
        if (!workload) workload = std::make_shared<const models::Workload>(sim::build_workload(config));
        const sim::PhasedResult p = sim::simulate_phases(workload, config, calibration);
        const sim::Metrics& m = p.headline.metrics;
        r.simulated = true;
        r.step_time_s = p.average_step_time_s;
        r.samples_per_s = m.samples_per_s;
        r.tokens_per_s = m.tokens_per_s;
        r.mfu = m.mfu;
        r.compute_s = m.compute_s;
        r.exposed_comm_s = m.exposed_comm_s;
        r.peak_memory_bytes = m.peak_memory_bytes;
        r.usable_memory_bytes = m.usable_memory_bytes;
        r.fits = m.fits;
        if (!m.fits)
            r.why = fmt::format("does not fit: needs {} per GPU, {} usable (over by {})", gib(m.peak_memory_bytes),
                                gib(m.usable_memory_bytes), gib(m.peak_memory_bytes - m.usable_memory_bytes));
    } catch (const Error& e) {
        r = Outcome{};
        r.why = e.what();
    }
    return r;
}

void add_outcome_fields(nlohmann::ordered_json& j, const Outcome& o) {
    j["simulated"] = o.simulated;
    if (o.simulated) {
        j["step_time_s"] = o.step_time_s;
        j["samples_per_s"] = o.samples_per_s;
        j["tokens_per_s"] = o.tokens_per_s;
        j["mfu"] = o.mfu;
        j["compute_s"] = o.compute_s;
        j["exposed_comm_s"] = o.exposed_comm_s;
        j["peak_memory_bytes"] = o.peak_memory_bytes;
        j["usable_memory_bytes"] = o.usable_memory_bytes;
    }
    j["fits"] = o.fits;
    j["why"] = o.why;
}

std::vector<SweepResult> run_sweep(const std::vector<Candidate>& candidates, const calib::Calibration& calibration,
                                   const SweepProgress& progress) {
    std::map<WorkloadKey, std::shared_ptr<const models::Workload>> workloads;
    std::vector<SweepResult> out;
    out.reserve(candidates.size());
    for (const auto& c : candidates) {
        SweepResult r;
        if (c.skip_reason.empty())
            static_cast<Outcome&>(r) = simulate_outcome(c.config, workloads[key_of(c.config)], calibration);
        else
            r.why = c.skip_reason;
        r.candidate = c;
        out.push_back(std::move(r));
        if (progress) progress(out.size(), candidates.size(), c);
    }
    return out;
}

std::string sweep_csv(const std::vector<SweepResult>& results) {
    const auto cols = setting_columns(results);
    std::string out = "index";
    for (const auto& c : cols) {
        out += ',';
        out += c;
    }
    out += ",step_time_s,samples_per_s,tokens_per_s,mfu,exposed_comm_s,peak_memory_bytes,fits,why\n";
    for (const auto& r : results) {
        out += std::to_string(r.candidate.index);
        for (const auto& c : cols) {
            out += ',';
            out += csv_field(setting(r.candidate, c));
        }
        if (r.simulated)
            out += fmt::format(",{:.6g},{:.6g},{:.6g},{:.4f},{:.6g},{}", r.step_time_s, r.samples_per_s, r.tokens_per_s,
                               r.mfu, r.exposed_comm_s, r.peak_memory_bytes);
        else
            out += ",,,,,,";
        out += fmt::format(",{},{}\n", r.fits ? "true" : "false", csv_field(r.why));
    }
    return out;
}

std::string sweep_json(const std::vector<SweepResult>& results) {
    return sweep_rows_json(results).dump(2) + "\n";
}

nlohmann::ordered_json sweep_rows_json(const std::vector<SweepResult>& results) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& r : results) {
        nlohmann::ordered_json j;
        j["index"] = r.candidate.index;
        j["config"] = r.candidate.label();
        nlohmann::ordered_json settings = nlohmann::ordered_json::object();
        for (const auto& [k, v] : r.candidate.settings)
            if (!v.empty()) settings[k] = v;
        j["settings"] = settings;
        j["micro_batch"] = r.candidate.config.micro_batch;
        j["grad_accum"] = r.candidate.config.grad_accum;
        add_outcome_fields(j, r);
        arr.push_back(std::move(j));
    }
    return arr;
}

namespace {

// The row's settings as single-value axes over `base`: one candidate, the
// configuration the row was simulated with.
sim::Config config_of_row(const SweepResult& row, const sim::Config& base, const std::string& file,
                          const std::string& at) {
    SearchSpace space;
    bool has_grad_accum = false;
    for (const auto& [k, v] : row.candidate.settings) {
        space.axes.push_back({k, {v}});
        has_grad_accum = has_grad_accum || k == "grad_accum";
    }
    // --global-batch derived grad_accum per row; the row says what it was.
    if (!has_grad_accum) space.axes.push_back({"grad_accum", {std::to_string(row.candidate.config.grad_accum)}});
    try {
        auto candidates = enumerate(space, base);
        return candidates.at(0).config;
    } catch (const ConfigError& e) {
        throw ParseError(file, at + "/settings",
                         fmt::format("these settings do not apply to the base configuration given ({}); give the "
                                     "options the sweep was run with",
                                     e.what()));
    }
}

}  // namespace

std::vector<SweepResult> parse_sweep_json(const std::string& text, const std::string& file, const sim::Config* base,
                                          std::optional<std::size_t>* recommended) {
    check_json_text(text, file, "a sweep (the JSON array `dtsim sweep --format json` writes)");
    nlohmann::ordered_json doc;
    try {
        doc = nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw_json_syntax_error(e, text, file);
    }
    // advise --format json: {"advise": {...}, "recommended": i, ..., "configurations": [rows]}.
    std::string rows_at;
    if (doc.is_object() && doc.contains("configurations")) {
        rows_at = "/configurations";
        if (recommended && doc.contains("recommended")) {
            const auto& r = doc["recommended"];
            if (!r.is_number_unsigned() || r.get<std::size_t>() >= doc["configurations"].size())
                throw ParseError(file, "/recommended", "expected the index of one of the configurations");
            *recommended = r.get<std::size_t>();
        }
    }
    const nlohmann::ordered_json& j = rows_at.empty() ? doc : doc["configurations"];
    if (!j.is_array() || j.empty())
        throw ParseError(file, rows_at,
                         "expected a non-empty array of sweep rows (`dtsim sweep --format json`, or the "
                         "\"configurations\" of `dtsim advise --format json`)");
    std::vector<SweepResult> out;
    for (std::size_t i = 0; i < j.size(); ++i) {
        const auto& row = j[i];
        const std::string at = fmt::format("{}/{}", rows_at, i);
        if (!row.is_object()) throw ParseError(file, at, "expected an object (a sweep row)");
        auto field = [&](const char* key) -> const nlohmann::ordered_json& {
            if (!row.contains(key)) throw ParseError(file, at + "/" + key, "missing; expected a sweep row's field");
            return row[key];
        };
        auto number = [&](const char* key) {
            const auto& v = field(key);
            if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
                throw ParseError(file, at + "/" + key,
                                 fmt::format("expected a number >= 0, found {}", json_excerpt(Json(v))));
            return v.get<double>();
        };
        auto boolean = [&](const char* key) {
            const auto& v = field(key);
            if (!v.is_boolean()) throw ParseError(file, at + "/" + key, "expected true or false");
            return v.get<bool>();
        };
        SweepResult r;
        r.candidate.index = i;
        const auto& settings = field("settings");
        if (!settings.is_object()) throw ParseError(file, at + "/settings", "expected an object of axis values");
        for (const auto& [k, v] : settings.items()) {
            if (!v.is_string()) throw ParseError(file, at + "/settings/" + k, "expected a string");
            r.candidate.settings.emplace_back(k, v.get<std::string>());
            if (k == "strategy") r.candidate.strategy = v.get<std::string>();
        }
        if (r.candidate.strategy.empty()) r.candidate.strategy = base ? base->strategy : "";
        r.candidate.config.micro_batch = static_cast<std::int64_t>(number("micro_batch"));
        r.candidate.config.grad_accum = static_cast<int>(number("grad_accum"));
        r.simulated = boolean("simulated");
        r.fits = boolean("fits");
        const auto& why = field("why");
        if (!why.is_string()) throw ParseError(file, at + "/why", "expected a string");
        r.why = why.get<std::string>();
        if (r.simulated) {
            r.step_time_s = number("step_time_s");
            r.samples_per_s = number("samples_per_s");
            r.tokens_per_s = number("tokens_per_s");
            r.mfu = number("mfu");
            r.compute_s = number("compute_s");
            r.exposed_comm_s = number("exposed_comm_s");
            r.peak_memory_bytes = static_cast<std::int64_t>(number("peak_memory_bytes"));
            r.usable_memory_bytes = static_cast<std::int64_t>(number("usable_memory_bytes"));
        }
        if (base && r.simulated) {  // a skipped row has no configuration to show
            const std::int64_t micro_batch = r.candidate.config.micro_batch;
            r.candidate.config = config_of_row(r, *base, file, at);
            if (r.candidate.config.micro_batch != micro_batch)
                throw ParseError(file, at + "/micro_batch",
                                 fmt::format("{} in the file, {} from its settings over the base configuration; give "
                                             "the --micro-batch the sweep was run with",
                                             micro_batch, r.candidate.config.micro_batch));
        }
        out.push_back(std::move(r));
    }
    return out;
}

std::vector<SweepResult> read_sweep_json(const std::string& path, const sim::Config* base,
                                         std::optional<std::size_t>* recommended) {
    return parse_sweep_json(read_config_file(path), path, base, recommended);
}

bool looks_like_sweep_json(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::string head(4096, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<std::size_t>(in.gcount()));
    const auto first = head.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return false;
    // advise's document names its kind first; a trace object has traceEvents.
    if (head[first] == '{') {
        const auto key = head.find_first_not_of(" \t\r\n", first + 1);
        return key != std::string::npos && head.compare(key, 8, "\"advise\"") == 0;
    }
    if (head[first] != '[') return false;
    // A sweep row's first keys are "index", "config", "settings"; a trace event has "ph".
    const auto settings = head.find("\"settings\"");
    return settings != std::string::npos && head.find("\"ph\"") > settings;
}

}  // namespace dtsim::advisor
