// CPU microbenchmarks: real measurements with short policies, so the whole file
// runs in a few seconds on a small machine.
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/cpu_benchmarks.hpp"
#include "dtsim/profiler/host_info.hpp"
#include "dtsim/runtime/cpu_kernels.hpp"

#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

using namespace dtsim;
using namespace dtsim::profiler;
using dtsim::test::TempDir;

namespace {

const RepeatPolicy kQuick{1, 3, 20, 0.02};

}  // namespace

TEST_CASE("bench_gemm measures one point per shape, big shapes faster per flop") {
    const auto shapes = default_gemm_shapes(true);
    REQUIRE(shapes.size() >= 2);
    int calls = 0;
    const auto points = bench_gemm(shapes, kQuick, [&](std::string_view, double f) {
        CHECK(f >= 0);
        CHECK(f <= 1);
        ++calls;
    });
    CHECK(calls > 0);
    REQUIRE(points.size() == shapes.size());
    for (std::size_t i = 0; i < points.size(); ++i) {
        CHECK(points[i].dtype == DType::fp32);
        CHECK(points[i].m == shapes[i].m);
        CHECK(points[i].n == shapes[i].n);
        CHECK(points[i].k == shapes[i].k);
        CHECK(points[i].batch == 1);
        CHECK(points[i].time_us > 0);
    }
    // A 4x4x4 GEMM is all call overhead; 256^3 runs near peak (about 20x the
    // rate here), a margin that survives a loaded machine.
    const std::vector<GemmShape> pair{{4, 4, 4}, {256, 256, 256}};
    const auto timed = bench_gemm(pair, kQuick, nullptr);
    REQUIRE(timed.size() == 2);
    auto rate = [](const calib::GemmPoint& p) { return 2.0 * double(p.m) * double(p.n) * double(p.k) / p.time_us; };
    CHECK(rate(timed[1]) > 2 * rate(timed[0]));
}

TEST_CASE("the kernels' scratch is four times the last-level cache, so long passes stream from memory") {
    constexpr std::int64_t MiB = 1LL << 20;
    CHECK(runtime::memory_pass_scratch_bytes(32 * MiB) == 128 * MiB);
    CHECK(runtime::memory_pass_scratch_bytes(96 * MiB) == 384 * MiB);
    CHECK(runtime::memory_pass_scratch_bytes(0) == 128 * MiB);           // unknown: as for 32 MiB
    CHECK(runtime::memory_pass_scratch_bytes(2 * MiB) == 64 * MiB);      // never below 64 MiB
    CHECK(runtime::memory_pass_scratch_bytes(1024 * MiB) == 512 * MiB);  // nor above 512 MiB
    CHECK(runtime::memory_pass_scratch_bytes() >= 64 * MiB);
}

TEST_CASE("default GEMM shapes: the full grid is larger and covers skinny shapes") {
    const auto full = default_gemm_shapes(false);
    CHECK(full.size() >= 20);
    CHECK(full.size() > default_gemm_shapes(true).size());
    bool skinny = false;
    for (const auto& s : full) skinny = skinny || (s.m >= 16 * s.n);
    CHECK(skinny);
}

TEST_CASE("bench_memory reports positive bandwidths and a small kernel overhead") {
    const MemoryResult r = bench_memory(kQuick, nullptr);
    CHECK(r.stream_gbps > 0.1);
    CHECK(r.memcpy_gbps > 0.1);
    CHECK(r.kernel_overhead_us > 0);
    CHECK(r.kernel_overhead_us < 100);
}

TEST_CASE("bench_file_io writes and reads a real file and leaves nothing behind") {
    const TempDir dir;
    const FileIoResult r = bench_file_io(dir.path().string(), std::int64_t{8} << 20, kQuick);
    CHECK(r.write_gbps > 0);
    CHECK(r.read_gbps > 0);
    CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("bench_file_io names a missing directory") {
    const TempDir dir;
    const std::string missing = (dir.path() / "no_such_dir").string();
    CHECK_THROWS_WITH(bench_file_io(missing, 1 << 20, kQuick), Catch::Contains(missing));
    CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("bench_cpu_adam_params_per_s runs a real Adam step") {
    CHECK(bench_cpu_adam_params_per_s(1 << 20, kQuick) > 1e6);
    CHECK_THROWS_AS(bench_cpu_adam_params_per_s(0, kQuick), Error);
}

TEST_CASE("sgemm computes each layout's product: NN, NT (x W^T) and TN (A^T B)") {
    const std::int64_t m = 3, n = 4, k = 5;
    std::vector<float> a(m * k), b(k * n);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) - 3.0f;
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) - 2.0f;
    // Reference C[i][j] = sum_l A(i,l) B(l,j), with A(i,l) and B(l,j) read
    // from the storage each layout implies.
    auto reference = [&](GemmLayout layout) {
        std::vector<float> c(m * n, 0.0f);
        for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j)
                for (std::int64_t l = 0; l < k; ++l) {
                    const float av = layout == GemmLayout::tn ? a[l * m + i] : a[i * k + l];
                    const float bv = layout == GemmLayout::nt ? b[j * k + l] : b[l * n + j];
                    c[i * n + j] += av * bv;
                }
        return c;
    };
    for (const GemmLayout layout : {GemmLayout::nn, GemmLayout::nt, GemmLayout::tn}) {
        CAPTURE(to_string(layout));
        std::vector<float> c(m * n, -1.0f);
        runtime::sgemm(layout, m, n, k, a.data(), b.data(), c.data());
        const auto want = reference(layout);
        for (std::size_t i = 0; i < c.size(); ++i) CHECK(c[i] == want[i]);  // small integers: exact
    }
    // The layouts really differ on these operands.
    CHECK(reference(GemmLayout::nt) != reference(GemmLayout::nn));
    CHECK(reference(GemmLayout::tn) != reference(GemmLayout::nn));
}

TEST_CASE("bench_gemm keeps each shape's layout, and every layout probe has its NN twin in the grid") {
    for (const bool quick : {true, false}) {
        const auto grid = default_gemm_shapes(quick);
        const auto probes = layout_probe_shapes(quick);
        CHECK(probes.size() >= 2);
        for (const auto& p : probes) {
            CHECK(p.layout != GemmLayout::nn);
            CHECK(std::find(grid.begin(), grid.end(), GemmShape{p.m, p.n, p.k}) != grid.end());
        }
        for (const auto& s : grid) CHECK(s.layout == GemmLayout::nn);
    }
    const std::vector<GemmShape> shapes{{96, 64, 32, GemmLayout::nt}, {96, 64, 32, GemmLayout::tn}};
    const auto points = bench_gemm(shapes, kQuick, nullptr);
    REQUIRE(points.size() == 2);
    CHECK(points[0].layout == GemmLayout::nt);
    CHECK(points[1].layout == GemmLayout::tn);
    CHECK(points[0].time_us > 0);
}

TEST_CASE("a warning when OpenBLAS runs pre-AVX2 kernels on a CPU with AVX2, and only then") {
    HostInfo h;
    h.cpu_model = "Intel(R) Xeon(R) Processor";
    h.blas_core = "Prescott";  // what Debian 12's OpenBLAS 0.3.21 picks on processors newer than it
    h.cpu_avx2 = true;
    h.cpu_avx512 = true;
    const std::string w = blas_kernel_warning(h);
    CHECK_THAT(
        w, Catch::Contains("Prescott") && Catch::Contains("OPENBLAS_CORETYPE=Haswell") && Catch::Contains("SkylakeX"));
    h.cpu_avx512 = false;
    CHECK_THAT(blas_kernel_warning(h), !Catch::Contains("SkylakeX"));
    h.blas_core = "Haswell";
    CHECK(blas_kernel_warning(h).empty());
    h.blas_core = "Prescott";
    h.cpu_avx2 = false;  // an old CPU: the generic kernels are its best
    CHECK(blas_kernel_warning(h).empty());
    // This machine: the warning agrees with what OpenBLAS and the CPU report.
    const HostInfo here = host_info();
    CHECK(blas_kernel_warning(here).empty() == (here.blas_core != "Prescott" || !here.cpu_avx2));
}
