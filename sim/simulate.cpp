#include "dtsim/sim/simulate.hpp"

#include "dtsim/models/model_registry.hpp"
#include "dtsim/sim/cost_model.hpp"
#include "dtsim/sim/strategy.hpp"

#include <algorithm>

namespace dtsim::sim {

models::Workload build_workload(const Config& config) {
    config.validate();
    models::WorkloadRequest request;
    request.model = config.model;
    request.micro_batch = config.micro_batch;
    request.seq_len = config.seq_len;
    request.activation_dtype = compute_dtype(config.precision);
    request.attention = config.attention;
    request.autocast = workload_autocast(config);
    return models::build_workload(request);
}

SimResult simulate(const Config& config, const calib::Calibration& calibration) {
    return simulate(std::make_shared<const models::Workload>(build_workload(config)), config, calibration);
}

PhasedResult simulate_phases(std::shared_ptr<const models::Workload> workload, const Config& config,
                             const calib::Calibration& calibration) {
    PhasedResult out;
    double weighted = 0, weights = 0;
    const auto phases = step_phases(config);
    for (std::size_t i = 0; i < phases.size(); ++i) {
        Config c = config;
        c.iteration = phases[i].iteration;
        SimResult r = simulate(workload, c, calibration);
        out.phases.push_back(
            {phases[i].label, phases[i].iteration, phases[i].weight, r.metrics.step_time_s, r.metrics.exposed_comm_s});
        weighted += phases[i].weight * r.metrics.step_time_s;
        weights += phases[i].weight;
        if (i == 0) out.headline = std::move(r);
    }
    out.average_step_time_s = weights > 0 ? weighted / weights : out.headline.metrics.step_time_s;
    // Throughput and MFU are long-run figures: they follow the average step
    // (post-local SGD's averaging steps), not the headline phase alone.
    Metrics& m = out.headline.metrics;
    if (out.average_step_time_s > 0 && m.step_time_s > 0) {
        const double scale = m.step_time_s / out.average_step_time_s;
        m.samples_per_s *= scale;
        m.tokens_per_s *= scale;
        m.mfu *= scale;
    }
    return out;
}

std::optional<calib::Calibration> with_node_share(const calib::Calibration& c, int ranks_per_node) {
    const calib::HostSpec& h = c.host;
    if (!c.provenance.host_ranks() || ranks_per_node <= 0 || ranks_per_node >= c.gpus_per_node ||
        (h.mem_bw_one_rank_gbps <= 0 && h.first_touch_one_rank_gbps <= 0))
        return std::nullopt;
    const double share = static_cast<double>(c.gpus_per_node) / ranks_per_node;
    const auto rate = [&](double all_busy, double alone) {
        return alone > 0 && all_busy > 0 ? std::min(alone, all_busy * share) : all_busy;
    };
    calib::Calibration out = c;
    out.device.mem_bw_gbps = rate(c.device.mem_bw_gbps, h.mem_bw_one_rank_gbps);
    out.host.first_touch_gbps = rate(h.first_touch_gbps, h.first_touch_one_rank_gbps);
    out.host.mem_bw_one_rank_gbps = out.host.first_touch_one_rank_gbps = 0;
    return out;
}

SimResult simulate(std::shared_ptr<const models::Workload> workload, const Config& config,
                   const calib::Calibration& calibration) {
    if (const auto shared = with_node_share(calibration, config.topology.gpus_per_node))
        return simulate(std::move(workload), config, *shared);
    SimResult r;
    if (calibration.provenance.host_ranks() && !config.collectives_block_compute) {
        Config on_cpu = config;  // the model's thread waits in each synchronous collective
        on_cpu.collectives_block_compute = true;
        r.plan = lower(*workload, on_cpu);
    } else {
        r.plan = lower(*workload, config);
    }
    const CostModel cost(calibration, parse_nccl_env(config.env));
    r.duration_ns = cost.price(r.plan, *workload);
    r.schedule = run_engine(r.plan, r.duration_ns, calibration.overlap, cost.lanes(r.plan, r.duration_ns),
                            stragglers(r.plan, calibration.overlap));
    r.metrics = compute_metrics(r.plan, r.schedule, *workload, config, calibration);
    r.workload = std::move(workload);
    return r;
}

}  // namespace dtsim::sim
