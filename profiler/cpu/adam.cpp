// CPU optimizer microbenchmark: AdamW steps (fp32 params, grads and both
// moments) through the executor's kernel (cpu_kernels.hpp).
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/cpu_benchmarks.hpp"
#include "dtsim/runtime/cpu_kernels.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstddef>

namespace dtsim::profiler {

double bench_cpu_adam_params_per_s(std::int64_t parameters, const RepeatPolicy& policy) {
    if (parameters <= 0)
        throw Error(fmt::format("the CPU Adam benchmark needs a positive parameter count, not {}", parameters));
    // The executor's kernel over its scratch (cpu_kernels.hpp).
    runtime::Floats scratch(static_cast<std::size_t>(runtime::memory_pass_scratch_bytes()) / sizeof(float));
    for (std::size_t i = 0; i < scratch.size(); ++i) scratch[i] = static_cast<float>(i % 1000) * 1e-4f - 0.05f;
    int t = 0;
    const Measurement meas = measure(policy, [&] {
        const auto start = std::chrono::steady_clock::now();
        runtime::adam_pass(parameters, scratch, ++t);
        return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    });
    return static_cast<double>(parameters) / (meas.mean_us * 1e-6);
}

}  // namespace dtsim::profiler
