// Prediction accuracy: for each configuration, the simulator prices the Plan
// from a calibration of this machine and the executor runs exactly that Plan
// (replay) on the launched ranks; prints each error and the median and p90 of
// |error|. Target on the 2-core development machine: median <= 5 %, p90 <= 10 %.
//   mpirun -np 2 build/release/bench/accuracy [--steps 5] [--hardware cal.json] [--full-calibration]
//       [--save-calibration cal.json]
#include "dtsim/executor/calibration_targets.hpp"
#include "dtsim/executor/execute.hpp"
#include "dtsim/executor/validation.hpp"
#include "dtsim/profiler/calibrate_cpu.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/strategy.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace dtsim;

struct Case {
    std::string label;
    std::string strategy;
    std::vector<std::pair<std::string, std::string>> knobs;
    int grad_accum = 1;
};

std::vector<Case> cases() {
    const std::pair<std::string, std::string> units{"auto_wrap_policy", "size"}, unit_size{"min_num_params", "2e6"};
    return {
        {"ddp bucket_cap_mb=1", "ddp", {{"bucket_cap_mb", "1"}}},
        {"ddp bucket_cap_mb=4", "ddp", {{"bucket_cap_mb", "4"}}},
        {"ddp bucket_cap_mb=25", "ddp", {{"bucket_cap_mb", "25"}}},
        {"ddp gradient_as_bucket_view", "ddp", {{"gradient_as_bucket_view", "true"}}},
        {"ddp fp16_compress", "ddp", {{"comm_hook", "fp16_compress"}}},
        {"ddp bf16_compress", "ddp", {{"comm_hook", "bf16_compress"}}},
        {"ddp powerSGD rank 4", "ddp", {{"comm_hook", "powerSGD"}, {"matrix_approximation_rank", "4"}}},
        {"ddp no_sync x2", "ddp", {}, 2},
        {"fsdp FULL_SHARD", "fsdp", {units, unit_size}},
        {"fsdp SHARD_GRAD_OP", "fsdp", {units, unit_size, {"sharding_strategy", "SHARD_GRAD_OP"}}},
        {"fsdp NO_SHARD", "fsdp", {units, unit_size, {"sharding_strategy", "NO_SHARD"}}},
        {"fsdp no backward prefetch", "fsdp", {units, unit_size, {"backward_prefetch", "NONE"}}},
        {"fsdp BACKWARD_POST", "fsdp", {units, unit_size, {"backward_prefetch", "BACKWARD_POST"}}},
        {"fsdp forward_prefetch", "fsdp", {units, unit_size, {"forward_prefetch", "true"}}},
        {"zero stage 1", "deepspeed", {{"stage", "1"}}},
        {"zero stage 2", "deepspeed", {{"stage", "2"}}},
        {"zero stage 2 overlap_comm", "deepspeed", {{"stage", "2"}, {"overlap_comm", "true"}}},
        {"zero stage 2 bucket 1M", "deepspeed", {{"stage", "2"}, {"reduce_bucket_size", "1e6"}}},
        {"zero stage 3", "deepspeed", {{"stage", "3"}}},
        {"zero stage 2 cpu offload", "deepspeed", {{"stage", "2"}, {"offload_optimizer", "cpu"}}},
        {"zero stage 3 cpu offload", "deepspeed", {{"stage", "3"}, {"offload_optimizer", "cpu"}}},
        {"zero stage 3 param offload",
         "deepspeed",
         {{"stage", "3"}, {"offload_optimizer", "cpu"}, {"offload_param", "cpu"}}},
    };
}

sim::Config config_of(const Case& c, int ranks) {
    sim::Config config;
    config.model = "mlp-8x1024";
    config.micro_batch = 128;
    config.topology = {1, ranks};
    config.strategy = c.strategy;
    config.knobs = c.knobs;
    config.grad_accum = c.grad_accum;
    return config;
}

double percentile(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    const double pos = q * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(pos);
    const auto hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace

int main(int argc, char** argv) {
    int steps = 5;
    std::string hardware;
    bool full = false;
    std::string save;  // write the calibration used here (to reuse it with --hardware)
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) steps = std::atoi(argv[++i]);
        if (std::strcmp(argv[i], "--hardware") == 0 && i + 1 < argc) hardware = argv[++i];
        if (std::strcmp(argv[i], "--full-calibration") == 0) full = true;
        if (std::strcmp(argv[i], "--save-calibration") == 0 && i + 1 < argc) save = argv[++i];
    }
    executor::ensure_mpi();
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    try {
        calib::Calibration cal;
        if (!hardware.empty()) {
            cal = calib::load_hardware(hardware);
        } else {
            // The exact GEMM shapes and collective sizes the cases run.
            profiler::CpuCalibrationOptions o;
            o.quick = !full;
            for (const Case& c : cases()) {
                const sim::Config config = config_of(c, size);
                const models::Workload w = sim::build_workload(config);
                executor::add_calibration_targets(o, w, sim::lower(w, config));
            }
            cal = profiler::calibrate_cpu(
                o, [](std::string_view, double) {}, [](std::string_view) {});
        }
        if (rank == 0 && !save.empty()) calib::write_calibration(cal, save);
        if (rank == 0)
            fmt::print(
                "accuracy: mlp-8x1024, micro-batch 128, fp32, {} ranks, {} steps per configuration, calibration "
                "'{}' ({})\n\n{:<30} {:>12} {:>12} {:>9}\n",
                size, steps, cal.name, full || !hardware.empty() ? "full" : "quick", "configuration", "predicted",
                "measured", "error");
        std::vector<double> errors;
        for (const Case& c : cases()) {
            const sim::Config config = config_of(c, size);
            auto workload = std::make_shared<const models::Workload>(sim::build_workload(config));
            const sim::SimResult predicted = sim::simulate(workload, config, cal);
            executor::ExecOptions eo;
            eo.steps = steps;
            eo.mode = executor::Mode::replay;
            const executor::ExecResult measured = executor::execute(predicted.plan, *workload, config, eo);
            if (rank != 0) continue;
            const executor::Comparison cmp = executor::compare(predicted, measured);
            errors.push_back(std::abs(cmp.error()));
            fmt::print("{:<30} {:>9.3f} ms {:>9.3f} ms {:>+8.1f} %\n", c.label, cmp.predicted_s * 1e3,
                       cmp.measured_s * 1e3, 100 * cmp.error());
        }
        if (rank == 0)
            fmt::print(
                "\n|error| over {} configurations: median {:.1f} %, p90 {:.1f} % (target: median <= 5 %, "
                "p90 <= 10 %)\n",
                errors.size(), 100 * percentile(errors, 0.5), 100 * percentile(errors, 0.9));
    } catch (const std::exception& e) {
        fmt::print(stderr, "accuracy: error on rank {}: {}\n", rank, e.what());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return 0;
}
