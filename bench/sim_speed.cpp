// Simulator speed: tasks simulated per second and whole simulations per second
// on one core. Targets: >= 5,000 simulations/s of gpt2-xl DDP on 16 GPUs
// (issue 2); >= 1,000/s for llama2-70b FULL_SHARD and ZeRO-3 offload on 1024
// GPUs (issue 3).
// It runs with the dtsim command's allocator policy (dtsim::keep_freed_memory);
// --glibc-defaults measures without it, as a library user who does not set it.
//   build/release/bench/sim_speed [--seconds S] [--glibc-defaults] [--iterations N]
// --iterations N runs exactly N simulations and N engine runs per scenario
// instead of a time budget: under `valgrind --tool=callgrind`, instructions
// per simulation compare two builds on a machine too noisy to time them;
// --scenario TEXT runs only the scenarios whose label contains TEXT.
#include "dtsim/common/host_memory.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/cost_model.hpp"
#include "dtsim/sim/engine.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/strategy.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

using Clock = std::chrono::steady_clock;

struct Scenario {
    std::string label;
    dtsim::sim::Config config;
};

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

void run(const Scenario& s, double budget_s, long iterations, const std::string& only) {
    if (s.label.find(only) == std::string::npos) return;
    const auto more = [&](Clock::time_point t0, std::size_t done) {
        return iterations > 0 ? done < static_cast<std::size_t>(iterations) : seconds_since(t0) < budget_s;
    };
    const auto cal = dtsim::calib::load_hardware("h100-sxm");
    const auto workload = std::make_shared<const dtsim::models::Workload>(dtsim::sim::build_workload(s.config));
    // Whole simulation from a built workload: lower, price, run, metrics.
    std::size_t sims = 0, tasks = 0;
    auto t0 = Clock::now();
    while (more(t0, sims)) {
        auto r = dtsim::sim::simulate(workload, s.config, cal);
        tasks += r.plan.tasks.size();
        ++sims;
    }
    const double whole = seconds_since(t0);
    // The engine alone on one lowered, priced plan.
    const auto plan = dtsim::sim::lower(*workload, s.config);
    const auto prices = dtsim::sim::CostModel(cal).price(plan, *workload);
    std::size_t runs = 0;
    t0 = Clock::now();
    std::size_t engine_runs = 0;
    while (more(t0, engine_runs++)) {
        auto sched = dtsim::sim::run_engine(plan, prices, cal.overlap);
        runs += sched.makespan_ns > 0;
    }
    const double engine = seconds_since(t0);
    fmt::print("{:<40} {:>7} tasks  {:>10.0f} simulations/s  {:>12.0f} tasks/s (whole)  {:>12.0f} tasks/s (engine)\n",
               s.label, plan.tasks.size(), double(sims) / whole, double(tasks) / whole,
               double(runs * plan.tasks.size()) / engine);
}

}  // namespace

int main(int argc, char** argv) {
    double budget_s = 2.0;
    bool glibc_defaults = false;
    long iterations = 0;
    std::string only;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--scenario") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc)
            iterations = std::atol(argv[++i]);
        else if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            budget_s = std::atof(argv[++i]);
        else if (std::strcmp(argv[i], "--glibc-defaults") == 0) glibc_defaults = true;
    }
    if (!glibc_defaults) dtsim::keep_freed_memory();
    dtsim::sim::Config gpt2;
    gpt2.model = "gpt2-xl";
    gpt2.topology = {2, 8};
    gpt2.micro_batch = 8;
    gpt2.seq_len = 1024;
    gpt2.precision = dtsim::sim::Precision::bf16_mixed;
    dtsim::sim::Config llama = gpt2;
    llama.model = "llama2-70b";
    llama.topology = {128, 8};
    llama.micro_batch = 1;
    llama.seq_len = 4096;
    fmt::print(
        "sim_speed: one core, {:.1f} s per measurement, {} (target: >= 5,000 simulations/s for gpt2-xl DDP)\n",
        budget_s, glibc_defaults ? "glibc's allocator defaults" : "dtsim's allocator policy (keep_freed_memory)");
    dtsim::sim::Config fsdp = llama;
    fsdp.strategy = "fsdp";
    dtsim::sim::Config zero3 = llama;
    zero3.strategy = "deepspeed";
    zero3.knobs = {{"stage", "3"}, {"offload_optimizer", "cpu"}, {"offload_param", "cpu"}};
    run({"gpt2-xl ddp, 16 GPUs", gpt2}, budget_s, iterations, only);
    run({"llama2-70b ddp, 1024 GPUs", llama}, budget_s, iterations, only);
    run({"llama2-70b fsdp FULL_SHARD, 1024 GPUs", fsdp}, budget_s, iterations, only);
    run({"llama2-70b zero-3 offload, 1024 GPUs", zero3}, budget_s, iterations, only);
    return 0;
}
