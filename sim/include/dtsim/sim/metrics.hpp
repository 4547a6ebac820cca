// Metrics: the summary of one simulated (or measured) training step.
#pragma once

#include "dtsim/models/workload.hpp"
#include "dtsim/profiler/calibration.hpp"
#include "dtsim/sim/config.hpp"
#include "dtsim/sim/engine.hpp"
#include "dtsim/sim/plan.hpp"

#include <cstdint>
#include <vector>

namespace dtsim::sim {

struct CollectiveSummary {
    calib::CollectiveKind kind;
    std::int64_t bytes = 0;  // payload of one call
    int group_size = 0;
    int count = 0;  // calls per step
};

struct Metrics {
    double step_time_s = 0;
    std::int64_t global_batch = 0;  // samples per optimizer step, all ranks
    double samples_per_s = 0;
    double tokens_per_s = 0;
    double mfu = 0;               // model flops / (step time * mfu_peak_tflops), per GPU
    double mfu_peak_tflops = 0;   // the compute dtype's peak, which MFU is measured against
    double compute_s = 0;         // time the compute stream is busy
    double comm_s = 0;            // time any collective runs
    double exposed_comm_s = 0;    // communication with the compute stream idle
    // Of comm_s, collectives waiting for their group's slowest rank (where the
    // calibration measured how far apart ranks run; Schedule::straggler_wait_ns).
    double straggler_wait_s = 0;
    double overlap_fraction = 0;  // share of communication time hidden under compute (0 without communication)
    double copy_s = 0;            // time any host<->device copy runs
    double host_compute_s = 0;    // time the host CPU computes (offloaded optimizer)
    double io_s = 0;              // time NVMe reads or writes run
    std::int64_t h2d_bytes = 0, d2h_bytes = 0, nvme_read_bytes = 0, nvme_write_bytes = 0;
    std::int64_t host_memory_bytes = 0;  // peak pinned host memory per rank
    std::int64_t peak_memory_bytes = 0;
    MemoryBreakdown peak_breakdown{};
    std::int64_t device_memory_bytes = 0;
    std::int64_t usable_memory_bytes = 0;  // device memory less the calibration's reserve
    bool fits = true;                      // peak <= usable memory
    std::int64_t comm_bytes_per_step = 0;  // collective payload bytes issued per step
    std::vector<CollectiveSummary> collectives;
};

Metrics compute_metrics(const Plan& plan, const Schedule& schedule, const models::Workload& workload,
                        const Config& config, const calib::Calibration& calibration);

}  // namespace dtsim::sim
