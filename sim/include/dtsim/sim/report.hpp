// The simulation report: names for tasks, and the JSON form of a result.
#pragma once

#include "dtsim/common/json_io.hpp"
#include "dtsim/profiler/calibration.hpp"
#include "dtsim/sim/simulate.hpp"

#include <optional>
#include <string>

namespace dtsim::sim {

// "forward h.3.mlp.c_fc", "allreduce bucket 7", "optimizer step".
std::string task_name(const Plan& plan, const models::Workload& workload, const Task& task);

struct ReportExtras {
    std::vector<PhaseResult> phases;  // from simulate_phases; the headline first
    double average_step_time_s = 0;
    std::string launch;  // Lightning's launch method, a one-off cost
};

// What could make a configuration that does not fit fit, biggest lever first,
// each as the options that set it ("a smaller --micro-batch (...)",
// "--activation-checkpointing", ...): only those that apply to this
// configuration. `simulate` and the GUI's what-if both say these.
std::vector<std::string> memory_levers(const SimResult& result, const Config& config);

// NCCL's choice ("Tree/LL128") for each of result.metrics.collectives, in its
// order, where the calibration's NCCL model prices the call; empty where a
// measured table or a per-link curve does.
std::vector<std::string> nccl_choices(const SimResult& result, const Config& config,
                                      const calib::Calibration& calibration);

// On a socket network (--network) across nodes: the TCP flows NCCL opens per
// channel under the run's NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD, what
// they carry against the NIC's share, and, where they hold the NIC back, the
// setting Lightning's DDP guide suggests. Empty where no socket network applies.
std::string socket_summary(const Config& config, const calib::Calibration& calibration);

// One JSON object with the configuration, the metrics, the memory breakdown,
// the collectives and (DDP) the buckets. Deterministic for the same input.
Json report_json(const SimResult& result, const Config& config, const calib::Calibration& calibration,
                 const ReportExtras& extras = {});

}  // namespace dtsim::sim
