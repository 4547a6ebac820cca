// GEMM microbenchmark of the CPU backend: OpenBLAS cblas_sgemm (row-major,
// fp32) on one BLAS thread, so that every MPI rank measures one core's worth of
// compute as the simulator prices it per rank.
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/cpu_benchmarks.hpp"
#include "dtsim/runtime/cpu_kernels.hpp"
#include "dtsim/runtime/huge_pages.hpp"
#include "one_blas_thread.hpp"

#include <fmt/format.h>


#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <vector>

namespace dtsim::profiler {

namespace {

// Tiny GEMMs are looped so that one sample lasts at least this long: a single
// call is near the clock's resolution and its overhead.
constexpr double kMinSampleUs = 50.0;
constexpr int kMaxCallsPerSample = 4096;

// Deterministic values in [-0.5, 0.5): no denormals, no zeros, same every run.
void fill(runtime::Floats& v, std::size_t seed) {
    for (std::size_t i = 0; i < v.size(); ++i)
        v[i] = static_cast<float>((i * 7919 + seed * 104729) % 1024) / 1024.0f - 0.5f;
}

}  // namespace

std::vector<GemmShape> default_gemm_shapes(bool quick) {
    if (quick) return {{8, 8, 8}, {64, 64, 64}, {256, 256, 256}, {512, 512, 512}};
    return {
        // Square, small to large.
        {64, 64, 64},
        {128, 128, 128},
        {256, 256, 256},
        {512, 512, 512},
        {1024, 1024, 1024},
        {2048, 2048, 2048},
        // Tall-skinny and short-wide: one or two small dimensions.
        {2048, 64, 64},
        {2048, 64, 1024},
        {2048, 128, 2048},
        {1024, 64, 1024},
        {64, 2048, 2048},
        {64, 1024, 256},
        {256, 2048, 64},
        {1024, 1024, 64},
        // Transformer-like: many tokens (m) by hidden sizes (n, k) of 256-1024.
        {2048, 256, 256},
        {2048, 512, 512},
        {2048, 1024, 1024},
        {2048, 1024, 256},
        {2048, 256, 1024},
        {2048, 768, 768},
        {2048, 2048, 512},
        {2048, 512, 2048},
        {1024, 1024, 256},
        {1024, 256, 1024},
        {512, 768, 768},
    };
}

std::vector<GemmShape> layout_probe_shapes(bool quick) {
    // Square, one skinny dimension of each kind, and an MLP layer's forward;
    // each is in default_gemm_shapes(quick), which gives its NN time.
    const std::vector<GemmShape> nn = quick ? std::vector<GemmShape>{{256, 256, 256}}
                                            : std::vector<GemmShape>{{512, 512, 512},
                                                                     {2048, 1024, 1024},
                                                                     {64, 2048, 2048},
                                                                     {2048, 64, 1024},
                                                                     {1024, 1024, 64}};
    std::vector<GemmShape> out;
    for (const GemmLayout layout : {GemmLayout::nt, GemmLayout::tn})
        for (GemmShape s : nn) {
            s.layout = layout;
            out.push_back(s);
        }
    return out;
}

std::vector<calib::GemmPoint> bench_gemm(std::span<const GemmShape> shapes, const RepeatPolicy& policy,
                                         const ProgressFn& progress) {
    const OneBlasThread one_thread;
    std::vector<calib::GemmPoint> out;
    out.reserve(shapes.size());
    for (std::size_t s = 0; s < shapes.size(); ++s) {
        const GemmShape& shape = shapes[s];
        if (shape.m <= 0 || shape.n <= 0 || shape.k <= 0)
            throw Error(fmt::format("GEMM shape {}x{}x{} has a non-positive dimension", shape.m, shape.n, shape.k));
        if (progress)
            progress(fmt::format("sgemm {} {}x{}x{}", to_string(shape.layout), shape.m, shape.n, shape.k),
                     static_cast<double>(s) / static_cast<double>(shapes.size()));
        const std::int64_t m = shape.m, n = shape.n, k = shape.k;
        // Buffers are allocated and filled once per shape, outside the timing.
        runtime::Floats a(static_cast<std::size_t>(shape.m * shape.k));
        runtime::Floats b(static_cast<std::size_t>(shape.k * shape.n));
        runtime::Floats c(static_cast<std::size_t>(shape.m * shape.n));
        fill(a, 1);
        fill(b, 2);
        fill(c, 3);
        auto call = [&] { runtime::sgemm(shape.layout, m, n, k, a.data(), b.data(), c.data()); };
        // One timed call (after a first, cold one) decides how many calls a sample loops.
        call();
        const auto probe = std::chrono::steady_clock::now();
        call();
        const double one_us = std::max(elapsed_us(probe), 1e-3);
        const int calls = std::clamp(static_cast<int>(std::ceil(kMinSampleUs / one_us)), 1, kMaxCallsPerSample);
        const Measurement meas = measure(policy, [&] {
            const auto start = std::chrono::steady_clock::now();
            for (int i = 0; i < calls; ++i) call();
            return elapsed_us(start) / calls;
        });
        out.push_back({DType::fp32, shape.m, shape.n, shape.k, 1, meas.mean_us, meas.spread, shape.layout});
    }
    if (progress) progress("sgemm", 1.0);
    return out;
}

}  // namespace dtsim::profiler
