// Runs every configuration of a search space through the simulator.
#pragma once

#include "dtsim/advisor/search_space.hpp"
#include "dtsim/profiler/calibration.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dtsim::advisor {

// One configuration simulated into the figures sweeps, advice and scaling
// report, or why it could not be.
struct Outcome {
    bool simulated = false;  // false: skipped or a ConfigError (see why)
    double step_time_s = 0;  // weighted average over the strategy's phases
    double samples_per_s = 0;
    double tokens_per_s = 0;
    double mfu = 0;
    double compute_s = 0;
    double exposed_comm_s = 0;
    std::int64_t peak_memory_bytes = 0;
    std::int64_t usable_memory_bytes = 0;
    bool fits = false;
    std::string why;  // why it does not fit, was skipped or is invalid
};

// Simulates `config` (all its phases) into an Outcome; a user error becomes
// `why`. `workload` is the config's workload, built here when null.
Outcome simulate_outcome(const sim::Config& config, std::shared_ptr<const models::Workload>& workload,
                         const calib::Calibration& calibration);

// The Outcome's fields into a JSON object (sweep and scale output).
void add_outcome_fields(nlohmann::ordered_json& j, const Outcome& o);

struct SweepResult : Outcome {
    Candidate candidate;
};

// Called after each configuration: (done, total, the configuration just simulated).
using SweepProgress = std::function<void(std::size_t, std::size_t, const Candidate&)>;

// Simulates each candidate in order; each distinct workload is built once.
std::vector<SweepResult> run_sweep(const std::vector<Candidate>& candidates, const calib::Calibration& calibration,
                                   const SweepProgress& progress = {});

// Output formats of `dtsim sweep`.
std::string sweep_csv(const std::vector<SweepResult>& results);
std::string sweep_json(const std::vector<SweepResult>& results);
// The rows of sweep_json, for documents that hold them (advise --format json).
nlohmann::ordered_json sweep_rows_json(const std::vector<SweepResult>& results);

// A `dtsim sweep --format json` file read back (the GUI's sweep view opens
// them). Each row's figures and settings are kept as written. With `base`
// (the configuration the sweep was run over: --model, --nodes, ...) each
// row's Config is rebuilt from its settings, so that it can be simulated
// again; without it, candidate.config is left default and has_config() is
// false. Errors name the file and the field. `looks_like_sweep_json` tells
// a sweep file from a trace by its first few KiB.
// `dtsim advise --format json` files are read too: their "configurations"
// are the rows, and `recommended` (when given) is set to the row advise picked.
std::vector<SweepResult> read_sweep_json(const std::string& path, const sim::Config* base,
                                         std::optional<std::size_t>* recommended = nullptr);
std::vector<SweepResult> parse_sweep_json(const std::string& text, const std::string& file, const sim::Config* base,
                                          std::optional<std::size_t>* recommended = nullptr);
bool looks_like_sweep_json(const std::string& path);

// "12.30 GiB"
std::string gib(std::int64_t bytes);

}  // namespace dtsim::advisor
