// `dtsim scale`: one configuration simulated at several GPU counts, with
// throughput, scaling efficiency and the step's breakdown at each.
#pragma once

#include "dtsim/advisor/sweep.hpp"

#include "dtsim/advisor/svg_plot.hpp"
#include "dtsim/profiler/calibration.hpp"
#include "dtsim/sim/config.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace dtsim::advisor {

struct ScalePoint : Outcome {
    int gpus = 0;
    sim::Topology topology;
    // (samples/s / GPUs) relative to the baseline point's; 0 without a baseline.
    double efficiency = 0;
};

struct ScaleResult {
    std::vector<ScalePoint> points;
    int baseline_gpus = 0;  // the first count that was simulated and fits; 0 if none
};

// "8,16,32" -> {8, 16, 32}. Throws ConfigError naming --gpus for an empty
// list, a non-number or a count < 1.
std::vector<int> parse_gpu_counts(const std::string& list);

// G <= gpus_per_node: one node of G GPUs; otherwise G / gpus_per_node nodes.
// Throws ConfigError naming --gpus when G is not a multiple of gpus_per_node.
sim::Topology scale_topology(int gpus, int gpus_per_node);

// Simulates `base` at each GPU count (every count is checked before any is simulated).
ScaleResult run_scaling(const sim::Config& base, const std::vector<int>& gpu_counts, int gpus_per_node,
                        const calib::Calibration& calibration);

std::string scaling_json(const ScaleResult& result);

// Samples/s (left axis) and scaling efficiency (right axis) over the GPU
// counts that were simulated and fit.
LinePlot scaling_plot(const ScaleResult& result, const std::string& title);

}  // namespace dtsim::advisor
