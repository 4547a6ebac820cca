// Memory microbenchmarks of the CPU backend: the streaming bandwidth that
// elementwise kernels see, host copy bandwidth, and the fixed cost of a kernel.
#include "dtsim/profiler/cpu_benchmarks.hpp"
#include "dtsim/profiler/memory_pass.hpp"

#include <chrono>
#include <cstddef>
#include <cstring>
#include <vector>

namespace dtsim::profiler {

namespace {

double elapsed_us(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

// Keeps results observable so that the compiler cannot drop the kernels.
volatile float g_sink = 0;

}  // namespace

MemoryResult bench_memory(bool quick, const RepeatPolicy& policy, const ProgressFn& progress) {
    // Buffers far larger than any cache (last-level caches reach tens of MiB).
    const std::size_t bytes = (quick ? 16u : 64u) << 20;
    const std::size_t n = bytes / sizeof(float);
    // Filling the buffers touches every page before any timing.
    std::vector<float> a(n, 0.0f), b(n, 1.0f);
    MemoryResult r;

    if (progress) progress("memory: stream", 0.0);
    // The executor's elementwise kernel over its scratch (memory_pass.hpp):
    // bytes moved per pass = bytes read + bytes written, as the Plan counts them.
    std::vector<float> scratch(static_cast<std::size_t>(kMemoryPassScratchBytes) / sizeof(float), 1.0f);
    const auto pass_bytes = static_cast<std::int64_t>(bytes) * 2;
    const Measurement stream = measure(policy, [&] {
        const auto start = std::chrono::steady_clock::now();
        memory_pass(pass_bytes, scratch);
        const double us = elapsed_us(start);
        g_sink = scratch.back();
        return us;
    });
    r.stream_gbps = static_cast<double>(pass_bytes) / (stream.median_us * 1e3);

    if (progress) progress("memory: memcpy", 0.4);
    // Copy bandwidth: bytes copied per second (each byte is read once and written
    // once, so memory traffic is twice this), the unit of host<->device copy rates.
    const Measurement copy = measure(policy, [&] {
        const auto start = std::chrono::steady_clock::now();
        std::memcpy(a.data(), b.data(), bytes);
        const double us = elapsed_us(start);
        g_sink = a[n / 3];
        return us;
    });
    r.memcpy_gbps = static_cast<double>(bytes) / (copy.median_us * 1e3);

    if (progress) progress("memory: kernel overhead", 0.8);
    // The fixed cost of a kernel: a 1 KiB pass (cache-resident), looped so
    // that a sample is long enough to time, divided by the calls.
    constexpr int kCalls = 2000;
    const Measurement tiny = measure(policy, [&] {
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < kCalls; ++i) memory_pass(1024, scratch);
        const double us = elapsed_us(start);
        g_sink = scratch.back();
        return us / kCalls;
    });
    r.kernel_overhead_us = tiny.median_us;
    if (progress) progress("memory", 1.0);
    return r;
}

}  // namespace dtsim::profiler
