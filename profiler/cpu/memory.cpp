// Memory microbenchmarks of the CPU backend: the streaming bandwidth that
// elementwise kernels see, host copy bandwidth, and the fixed cost of a kernel.
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/cpu_benchmarks.hpp"
#include "dtsim/runtime/cpu_kernels.hpp"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <chrono>
#include <cstddef>

namespace dtsim::profiler {

namespace {

// Keeps results observable so that the compiler cannot drop the kernels.
volatile float g_sink = 0;

// Each sample streams at least 128 MiB, and the whole of the executor's
// scratch (four times the last-level cache, cpu_kernels.hpp) once, as a pass
// over a real tensor streams through memory; quick runs too.
constexpr std::size_t kSampleBytes = 64u << 20;

// The executor's elementwise kernel over its scratch (cpu_kernels.hpp): bytes
// moved per pass = bytes read + bytes written, as the Plan counts them.
double stream_gbps(const RepeatPolicy& policy, runtime::Floats& scratch) {
    const auto pass_bytes = std::max(static_cast<std::int64_t>(kSampleBytes) * 2,
                                     static_cast<std::int64_t>(scratch.size() * sizeof(float)));
    const Measurement stream = measure(policy, [&] {
        const auto start = std::chrono::steady_clock::now();
        runtime::memory_pass(pass_bytes, scratch);
        const double us = elapsed_us(start);
        g_sink = scratch.back();
        return us;
    });
    return static_cast<double>(pass_bytes) / (stream.mean_us * 1e3);
}

runtime::Floats memory_scratch() {
    return runtime::Floats(static_cast<std::size_t>(runtime::memory_pass_scratch_bytes()) / sizeof(float), 1.0f);
}

}  // namespace

double bench_stream_gbps(const RepeatPolicy& policy) {
    runtime::Floats scratch = memory_scratch();
    return stream_gbps(policy, scratch);
}

MemoryResult bench_memory(const RepeatPolicy& policy, const ProgressFn& progress) {
    MemoryResult r;

    if (progress) progress("memory: stream", 0.0);
    runtime::Floats scratch = memory_scratch();
    const std::size_t bytes = std::max(kSampleBytes, scratch.size() * sizeof(float) / 2);  // all of the scratch
    r.stream_gbps = stream_gbps(policy, scratch);

    if (progress) progress("memory: in-place update", 0.25);
    // The in-place update against the stream kernel, in alternating rounds
    // (this machine's bandwidth drifts within seconds): the median ratio.
    {
        const RepeatPolicy one = single_sample(policy);
        const auto pass_bytes = static_cast<std::int64_t>(scratch.size() * sizeof(float));
        std::vector<double> ratios;
        for (int round = 0; round < 5; ++round) {
            const double out_of_place = stream_gbps(one, scratch);
            const Measurement update = measure(one, [&] {
                const auto start = std::chrono::steady_clock::now();
                runtime::update_pass(pass_bytes / 2 * 3, scratch);  // every element of the scratch's halves once
                const double us = elapsed_us(start);
                g_sink = scratch.front();
                return us;
            });
            ratios.push_back(static_cast<double>(pass_bytes / 2 * 3) / (update.mean_us * 1e3) / out_of_place);
        }
        r.in_place_speedup = summarize(std::move(ratios)).median_us;  // a ratio, not a time
    }

    if (progress) progress("memory: memcpy", 0.4);
    // Copy bandwidth: bytes copied per second (each byte is read once and written
    // once, so memory traffic is twice this), the unit of host<->device copy
    // rates; the executor's copy kernel over the same scratch.
    const Measurement copy = measure(policy, [&] {
        const auto start = std::chrono::steady_clock::now();
        runtime::copy_pass(static_cast<std::int64_t>(bytes), scratch);
        const double us = elapsed_us(start);
        g_sink = scratch.back();
        return us;
    });
    r.memcpy_gbps = static_cast<double>(bytes) / (copy.mean_us * 1e3);

    if (progress) progress("memory: kernel overhead", 0.8);
    // The fixed cost of a kernel: a 1 KiB pass (cache-resident), looped so
    // that a sample is long enough to time, divided by the calls.
    constexpr int kCalls = 2000;
    const Measurement tiny = measure(policy, [&] {
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < kCalls; ++i) runtime::memory_pass(1024, scratch);
        const double us = elapsed_us(start);
        g_sink = scratch.back();
        return us / kCalls;
    });
    r.kernel_overhead_us = tiny.mean_us;
    if (progress) progress("memory", 1.0);
    return r;
}

double bench_first_touch_gbps(std::int64_t bytes, const RepeatPolicy& policy) {
    const auto size = static_cast<std::size_t>(bytes);
    // Writing memory already mapped (the same pass, warm pages): the part that is not first touch.
    std::vector<char> warm(size, 1);
    const Measurement mapped = measure(policy, [&] {
        const auto start = std::chrono::steady_clock::now();
        std::memset(warm.data(), 2, size);
        const double us = elapsed_us(start);
        g_sink = static_cast<float>(warm[size / 2]);
        return us;
    });
    const Measurement fresh = measure(policy, [&] {
        const auto start = std::chrono::steady_clock::now();
        void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw Error(fmt::format("the first-touch benchmark could not map {} bytes", bytes));
        std::memset(p, 2, size);
        g_sink = static_cast<float>(static_cast<char*>(p)[size / 2]);
        munmap(p, size);
        return elapsed_us(start);
    });
    const double extra_us = std::max(fresh.mean_us - mapped.mean_us, 1e-3);
    return static_cast<double>(bytes) / (extra_us * 1e3);
}

}  // namespace dtsim::profiler
