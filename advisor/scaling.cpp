#include "dtsim/advisor/scaling.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/sim/simulate.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <memory>

namespace dtsim::advisor {

std::vector<int> parse_gpu_counts(const std::string& list) {
    std::vector<int> out;
    std::size_t start = 0;
    while (start <= list.size()) {
        const std::size_t comma = std::min(list.find(',', start), list.size());
        const std::string item = list.substr(start, comma - start);
        int value = 0;
        const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
        if (item.empty() || ec != std::errc{} || ptr != item.data() + item.size() || value < 1)
            throw ConfigError(fmt::format(
                "--gpus: '{}' is not a positive GPU count; give a comma-separated list such as 8,16,32", item));
        out.push_back(value);
        start = comma + 1;
    }
    return out;
}

sim::Topology scale_topology(int gpus, int gpus_per_node) {
    if (gpus < 1) throw ConfigError(fmt::format("--gpus: {} is not a positive GPU count", gpus));
    if (gpus_per_node < 1)
        throw ConfigError(fmt::format("--gpus-per-node: {} is not a positive GPU count", gpus_per_node));
    if (gpus <= gpus_per_node) return {1, gpus};
    if (gpus % gpus_per_node != 0)
        throw ConfigError(
            fmt::format("--gpus: {} GPUs do not fill whole nodes of {} GPUs; give a multiple of {} "
                        "(or change --gpus-per-node)",
                        gpus, gpus_per_node, gpus_per_node));
    return {gpus / gpus_per_node, gpus_per_node};
}

ScaleResult run_scaling(const sim::Config& base, const std::vector<int>& gpu_counts, int gpus_per_node,
                        const calib::Calibration& calibration) {
    if (gpu_counts.empty()) throw ConfigError("--gpus: give at least one GPU count");
    std::vector<sim::Topology> topologies;
    for (int g : gpu_counts) topologies.push_back(scale_topology(g, gpus_per_node));

    ScaleResult result;
    std::shared_ptr<const models::Workload> workload;
    for (std::size_t i = 0; i < gpu_counts.size(); ++i) {
        ScalePoint p;
        p.gpus = gpu_counts[i];
        p.topology = topologies[i];
        sim::Config c = base;
        c.topology = p.topology;
        // One workload for every count: the per-GPU micro-batch does not change.
        static_cast<Outcome&>(p) = simulate_outcome(c, workload, calibration);
        result.points.push_back(std::move(p));
    }
    for (const auto& p : result.points)
        if (p.simulated && p.fits && p.samples_per_s > 0) {
            result.baseline_gpus = p.gpus;
            const double per_gpu = p.samples_per_s / p.gpus;
            for (auto& q : result.points)
                if (q.simulated) q.efficiency = q.samples_per_s / q.gpus / per_gpu;
            break;
        }
    return result;
}

std::string scaling_json(const ScaleResult& result) {
    nlohmann::ordered_json j;
    j["baseline_gpus"] = result.baseline_gpus;
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& p : result.points) {
        nlohmann::ordered_json o;
        o["gpus"] = p.gpus;
        o["nodes"] = p.topology.nodes;
        o["gpus_per_node"] = p.topology.gpus_per_node;
        if (p.simulated) o["scaling_efficiency"] = p.efficiency;
        add_outcome_fields(o, p);
        arr.push_back(std::move(o));
    }
    j["points"] = std::move(arr);
    return j.dump(2) + "\n";
}

LinePlot scaling_plot(const ScaleResult& result, const std::string& title) {
    LinePlot plot;
    plot.title = title;
    plot.x_label = "GPUs";
    plot.y_label = "samples/s";
    plot.y2_label = "scaling efficiency";
    plot.log2_x = true;
    plot.y2_percent = true;
    PlotSeries thr{"samples/s", "#1f77b4", false, {}};
    PlotSeries eff{"scaling efficiency", "#d62728", true, {}};
    for (const auto& p : result.points) {
        if (!p.simulated || !p.fits) continue;
        thr.points.emplace_back(p.gpus, p.samples_per_s);
        eff.points.emplace_back(p.gpus, p.efficiency);
    }
    const auto by_x = [](const auto& a, const auto& b) { return a.first < b.first; };
    std::sort(thr.points.begin(), thr.points.end(), by_x);
    std::sort(eff.points.begin(), eff.points.end(), by_x);
    plot.series = {std::move(thr), std::move(eff)};
    return plot;
}

}  // namespace dtsim::advisor
