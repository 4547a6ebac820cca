// The advisor's pick, run for real: on 2 MPI ranks (tests/mpi/catch_2ranks.sh
// with [mpi2advisor]) this machine is calibrated, the advisor ranks a space
// of strategies for a small MLP, and the executor measures its pick against
// default DDP. The pick must be at least as fast, within the noise of this
// machine. (The pick is also printed, as a warning, on every run.)
#include "dtsim/advisor/ranking.hpp"
#include "dtsim/advisor/search_space.hpp"
#include "dtsim/advisor/sweep.hpp"
#include "dtsim/executor/calibration_targets.hpp"
#include "dtsim/executor/execute.hpp"
#include "dtsim/executor/measured_result.hpp"
#include "dtsim/executor/validation.hpp"
#include "dtsim/profiler/calibrate_cpu.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/strategy.hpp"

#include <mpi.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

using namespace dtsim;

namespace {

// Samples per second of `config`, measured in one run: from the median step
// time after warm-up.
double measured_samples_per_s(const sim::Config& config, int steps) {
    const models::Workload w = sim::build_workload(config);
    const sim::Plan plan = sim::lower(w, config);
    executor::ExecOptions o;
    o.steps = steps;
    o.mode = executor::Mode::replay;
    const executor::ExecResult r = executor::execute(plan, w, config, o);
    const double samples = static_cast<double>(config.micro_batch) * config.grad_accum * config.topology.world_size();
    return samples / r.median_step_time_s;
}

}  // namespace

TEST_CASE("2 ranks: the advisor's pick is measured at least as fast as default DDP", "[.mpi2advisor]") {
    executor::ensure_mpi();
    int world = 0, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (world != 2) {
        WARN("needs 2 ranks: run tests/mpi/catch_2ranks.sh with [mpi2advisor]");
        return;
    }
    sim::Config base;
    base.model = "mlp-6x1024";
    base.micro_batch = 64;
    base.topology = {1, world};
    // Strategies and their main knobs at a fixed batch and precision: what the
    // CPU backend runs faithfully.
    advisor::SearchSpace space;
    advisor::add_axis(space, {"strategy", {"ddp", "fsdp", "deepspeed"}});
    advisor::add_axis(space, {"bucket_cap_mb", {"1", "25"}});
    advisor::add_axis(space, {"sharding_strategy", {"FULL_SHARD", "SHARD_GRAD_OP"}});
    advisor::add_axis(space, {"stage", {"1", "2", "3"}});
    const std::vector<advisor::Candidate> candidates = advisor::enumerate(space, base);

    profiler::CpuCalibrationOptions copt;
    copt.quick = true;
    for (const auto& c : candidates) {
        const models::Workload w = sim::build_workload(c.config);
        executor::add_calibration_targets(copt.targets, w, sim::lower(w, c.config));
    }
    const calib::Calibration cal = profiler::calibrate_cpu(
        copt, [](std::string_view, double) {}, [](std::string_view) {});

    const std::vector<advisor::SweepResult> results = advisor::run_sweep(candidates, cal);
    const advisor::Ranking ranking = advisor::rank(results, {});
    REQUIRE_FALSE(ranking.order.empty());
    const advisor::SweepResult& pick = results[ranking.order.front()];
    sim::Config ddp = base;
    ddp.strategy = "ddp";
    INFO("pick: " << pick.candidate.label() << ", predicted " << pick.samples_per_s << " samples/s");

    // Interleaved, so that a drift of the machine hits both alike.
    std::vector<double> picked, baseline;
    for (int round = 0; round < 5; ++round) {
        picked.push_back(measured_samples_per_s(pick.candidate.config, 5));
        baseline.push_back(measured_samples_per_s(ddp, 5));
    }
    const double ratio = executor::median(picked) / executor::median(baseline);
    INFO("measured: pick " << executor::median(picked) << " samples/s, default DDP " << executor::median(baseline)
                           << " samples/s, ratio " << ratio);
    if (rank == 0) WARN("advisor pick " << pick.candidate.label() << " measured at " << ratio << "x default DDP");
    // Medians of 5 interleaved runs still move by about 5 % on a shared 2-core
    // machine (bench/results/accuracy.md); a pick measured 8 % slower fails.
    CHECK(ratio >= 0.92);
}
