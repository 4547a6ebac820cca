// Interference of host work with compute on a rank's core: memory passes at
// the normal priority (as the executor's copy and CPU-optimizer threads)
// beside GEMMs at the executor's compute priority.
#include "compute_probe.hpp"
#include "dtsim/profiler/cpu_benchmarks.hpp"
#include "dtsim/runtime/cpu_kernels.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

namespace dtsim::profiler {

void bench_host_overlap(bool quick, const RepeatPolicy& policy, calib::OverlapSpec& spec) {
    ComputeProbe probe(policy);
    runtime::Floats scratch(static_cast<std::size_t>(runtime::memory_pass_scratch_bytes()) / sizeof(float), 1.0f);
    constexpr std::int64_t kPassBytes = 32LL << 20;
    auto pass = [&] {
        const auto t0 = std::chrono::steady_clock::now();
        runtime::memory_pass(kPassBytes, scratch);
        return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    };
    const int iters = std::clamp(quick ? 10 : 20, std::max(1, policy.min_samples), std::max(1, policy.max_samples));
    // Rounds of the host pass alone, the probe re-timed alone, then both at
    // once; each factor is the median over rounds of one round's ratio, as
    // bench_overlap takes its own (collectives/overlap.cpp). One pair of phases
    // read compute's slowdown anywhere from 5 to 22, then 8.7 to 61.9, between
    // calibrations minutes apart (bench/results/torch_xcheck.md, stop 37).
    const int rounds = quick ? 3 : 5;
    std::vector<double> compute_slowdowns, host_slowdowns;
    for (int r = 0; r < rounds; ++r) {
        const double host_alone_us = measure(policy, pass).mean_us;  // the mean, as the calibration's figures
        if (r > 0) probe.retime(policy);                             // the constructor timed the first round's
        std::vector<double> host_times;
        const double compute_slowdown = probe.slowdown_during([&] {
            for (int i = 0; i < iters; ++i) host_times.push_back(pass());
        });
        const double host_together_us = summarize(std::move(host_times)).mean_us;
        compute_slowdowns.push_back(mean_over_ranks(compute_slowdown));
        host_slowdowns.push_back(mean_over_ranks(host_alone_us > 0 ? host_together_us / host_alone_us : 1.0));
    }
    spec.compute_slowdown_under_host = std::max(1.0, summarize(std::move(compute_slowdowns)).median_us);
    spec.host_slowdown_under_compute = std::max(1.0, summarize(std::move(host_slowdowns)).median_us);
}

}  // namespace dtsim::profiler
