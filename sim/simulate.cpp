#include "dtsim/sim/simulate.hpp"

#include "dtsim/models/model_registry.hpp"
#include "dtsim/sim/cost_model.hpp"
#include "dtsim/sim/strategy.hpp"

namespace dtsim::sim {

models::Workload build_workload(const Config& config) {
    config.validate();
    models::WorkloadRequest request;
    request.model = config.model;
    request.micro_batch = config.micro_batch;
    request.seq_len = config.seq_len;
    request.activation_dtype = compute_dtype(config.precision);
    request.attention = config.attention;
    return models::build_workload(request);
}

SimResult simulate(const Config& config, const calib::Calibration& calibration) {
    return simulate(std::make_shared<const models::Workload>(build_workload(config)), config, calibration);
}

SimResult simulate(std::shared_ptr<const models::Workload> workload, const Config& config,
                   const calib::Calibration& calibration) {
    SimResult r;
    r.plan = lower(*workload, config);
    r.duration_ns = CostModel(calibration).price(r.plan, *workload);
    r.schedule = run_engine(r.plan, r.duration_ns, calibration.overlap);
    r.metrics = compute_metrics(r.plan, r.schedule, *workload, config, calibration);
    r.workload = std::move(workload);
    return r;
}

}  // namespace dtsim::sim
