// The simulator's front door: Workload + Config + Calibration -> Plan,
// Schedule and Metrics.
#pragma once

#include "dtsim/models/workload.hpp"
#include "dtsim/profiler/calibration.hpp"
#include "dtsim/sim/config.hpp"
#include "dtsim/sim/engine.hpp"
#include "dtsim/sim/metrics.hpp"
#include "dtsim/sim/plan.hpp"

#include <memory>
#include <optional>

namespace dtsim::sim {

struct SimResult {
    // Shared, not copied: sweeps simulate one workload many times.
    std::shared_ptr<const models::Workload> workload;
    Plan plan;
    std::vector<std::int64_t> duration_ns;  // standalone price of each task
    Schedule schedule;
    Metrics metrics;
};

// Builds the workload for config.model at the config's micro-batch, sequence
// length and precision.
models::Workload build_workload(const Config& config);

// Over a CPU calibration that measured one rank alone, a run with fewer
// ranks per node than the calibration is priced by with_node_share's copy.
SimResult simulate(const Config& config, const calib::Calibration& calibration);
SimResult simulate(std::shared_ptr<const models::Workload> workload, const Config& config,
                   const calib::Calibration& calibration);

// CPU ranks share their node's memory. A calibration's memory bandwidth and
// first-touch rate are each rank's with all of its node's ranks busy; with
// fewer ranks a node, each rank gets min(one rank alone, the node's total
// over its ranks). Returns that calibration (its one-rank figures applied and
// cleared), or nothing where it prices as `calibration` does: GPUs, no
// one-rank figures, as many ranks a node as the calibration.
std::optional<calib::Calibration> with_node_share(const calib::Calibration& calibration, int ranks_per_node);

struct PhaseResult {
    std::string label;
    std::int64_t iteration = 0;
    double weight = 0;  // share of steps in the long run; 0 for one-off warm-ups
    double step_time_s = 0;
    double exposed_comm_s = 0;
};

struct PhasedResult {
    SimResult headline;               // the first phase (the steady state)
    std::vector<PhaseResult> phases;  // every phase, the headline first
    double average_step_time_s = 0;   // weighted by the phases' weights
};

// Simulates every phase the strategy reports (step_phases): the steady state,
// warm-ups, periodic averaging steps. The headline's throughput and MFU are
// rescaled to the weighted average step.
PhasedResult simulate_phases(std::shared_ptr<const models::Workload> workload, const Config& config,
                             const calib::Calibration& calibration);

}  // namespace dtsim::sim
