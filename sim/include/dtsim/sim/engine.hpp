// The discrete-event engine. Streams run their tasks in issue order (like CUDA
// streams); a task starts when it heads its stream and its dependencies have
// ended. Running tasks progress at rates that model contention: compute slows
// while communication runs and vice versa (calibrated factors), and concurrent
// collectives share the link. Integer nanoseconds; deterministic.
#pragma once

#include "dtsim/profiler/calibration.hpp"
#include "dtsim/sim/plan.hpp"

#include <cstdint>
#include <vector>

namespace dtsim::sim {

struct TaskTiming {
    std::int64_t start_ns = 0;
    std::int64_t end_ns = 0;
};

struct MemorySample {
    std::int64_t time_ns = 0;
    std::int64_t total_bytes = 0;  // device memory
    std::int64_t host_bytes = 0;   // pinned host memory (offload)
};

struct Schedule {
    std::vector<TaskTiming> timings;  // per task
    std::int64_t makespan_ns = 0;
    std::int64_t peak_memory_bytes = 0;  // device
    MemoryBreakdown peak_breakdown{};    // by category at the moment of the device peak
    std::int64_t peak_host_bytes = 0;
    std::vector<MemorySample> memory;  // total device memory after each change
};

// Runs the plan with standalone task durations `duration_ns` (from CostModel::price).
Schedule run_engine(const Plan& plan, const std::vector<std::int64_t>& duration_ns, const calib::OverlapSpec& overlap);

}  // namespace dtsim::sim
