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
    // Per task: how long a collective waited for its group's slowest rank
    // before its work (Stragglers), within its start-end span; empty where
    // the ranks arrive together.
    std::vector<std::int64_t> straggler_wait_ns;
};

// How a transport runs a process group's collectives. NCCL (and MPI): one at
// a time per stream. torch's ProcessGroupGloo: up to two at once, one on each
// of its two worker threads over one context (docs/notes/gloo-in-torch.md §2),
// and two running together hide each other's fixed per-call latency (thread
// hand-offs, round trips) while sharing the link's bandwidth
// (bench/torch_xcheck/gloo_lanes.py measures it).
// A collective stream stands for one process group, so lanes apply per
// stream. Where two streams share one group (ZeRO-3's all-gather and
// reduce-scatter streams, one DeepSpeed group) up to twice the lanes run.
struct CollectiveLanes {
    int lanes = 1;  // collectives a collective stream runs at once
    // Per task: the part of a collective's standalone time that is latency
    // (runs at its own pace beside another collective); empty: none.
    std::vector<std::int64_t> latency_ns;
};

// Where ranks meet. The engine times one rank, yet a collective starts only
// when its group's slowest rank arrives, and ranks that run the same work
// arrive apart (calib::OverlapSpec::straggler). Since they last met, ranks
// compute apart: from the moment the rank last waited on a collective (its
// compute stream idle until the collective ended; the step's start at first)
// to the moment a collective is ready on this rank, the slowest rank of the
// collective's group takes `factor` times as long. The collective waits, in
// wall time and without taking the link, until then; one ready later than
// that, or queued behind other collectives past it, does not wait.
struct Stragglers {
    std::vector<double> factor;  // per task, >= 1 (collectives); empty: ranks arrive together
};

// E[the slowest of n ranks' window] / E[one rank's], from a spread measured as
// `measured` over `measured_ranks` ranks: the excess over 1 scales with the
// expected maximum of n standard normal samples (0 for one rank, 0.564 for
// two, 1.029 for four, 1.424 for eight). 1 where measured_ranks < 2.
double straggler_factor(double measured, int measured_ranks, int n);
// Each collective's factor for its group's size (Plan::groups); empty where
// the calibration measured no spread or no collective has a group of two.
Stragglers stragglers(const Plan& plan, const calib::OverlapSpec& overlap);

// Runs the plan with standalone task durations `duration_ns` (from CostModel::price).
Schedule run_engine(const Plan& plan, const std::vector<std::int64_t>& duration_ns, const calib::OverlapSpec& overlap,
                    const CollectiveLanes& lanes = {}, const Stragglers& stragglers = {});

}  // namespace dtsim::sim
