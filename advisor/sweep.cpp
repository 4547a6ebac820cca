#include "dtsim/advisor/sweep.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/sim/simulate.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <tuple>

namespace dtsim::advisor {
namespace {

using WorkloadKey = std::tuple<std::string, std::int64_t, std::int64_t, int, int>;

WorkloadKey key_of(const sim::Config& c) {
    return {c.model, c.micro_batch, c.seq_len, static_cast<int>(c.precision), static_cast<int>(c.attention)};
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
    return arr.dump(2) + "\n";
}

}  // namespace dtsim::advisor
