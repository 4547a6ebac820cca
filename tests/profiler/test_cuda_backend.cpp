// CUDA backend: CUPTI activity-record handling on synthetic records (no GPU
// needed), and the benchmark entry points, which report "no CUDA device"
// cleanly where there is none and measure where there is one. Built only when
// the CUDA toolkit is found (dtsim_profiler_cuda defines DTSIM_HAVE_CUDA).
#ifdef DTSIM_HAVE_CUDA

#include "dtsim/profiler/cuda_activity.hpp"
#include "dtsim/profiler/cuda_benchmarks.hpp"
#include "dtsim/profiler/cuda_devices.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

using namespace dtsim;
using namespace dtsim::profiler;
using namespace dtsim::profiler::cuda;

namespace {

// A zero-initialised CUPTI kernel record, as CUPTI would deliver it.
CuptiKernelRecord kernel_record(const char* name, std::uint64_t start, std::uint64_t end, std::uint32_t stream) {
    CuptiKernelRecord k;
    std::memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.name = name;
    k.start = start;
    k.end = end;
    k.streamId = stream;
    k.correlationId = 42;
    return k;
}

CuptiMemcpyRecord memcpy_record(std::uint64_t bytes, std::uint64_t start, std::uint64_t end) {
    CuptiMemcpyRecord m;
    std::memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.bytes = bytes;
    m.start = start;
    m.end = end;
    m.streamId = 7;
    return m;
}

const CUpti_Activity* as_activity(const void* record) {
    return static_cast<const CUpti_Activity*>(record);
}

}  // namespace

TEST_CASE("CUPTI: kernel records convert to ours", "[cuda]") {
    // The records sit in a buffer as CUPTI lays them out; to_record sees only the header.
    alignas(8) std::vector<unsigned char> buffer(sizeof(CuptiKernelRecord));
    auto k = kernel_record("sm90_xmma_gemm_bf16bf16_bf16f32", 1'000'000, 1'250'500, 16);
    std::memcpy(buffer.data(), &k, sizeof k);
    auto r = to_record(reinterpret_cast<const CUpti_Activity*>(buffer.data()));
    REQUIRE(r);
    CHECK(r->kind == ActivityKind::kernel);
    CHECK(r->name == "sm90_xmma_gemm_bf16bf16_bf16f32");
    CHECK(r->start_ns == 1'000'000);
    CHECK(r->end_ns == 1'250'500);
    CHECK(r->stream == 16);
    CHECK(r->correlation == 42);
    CHECK(r->duration_us() == Approx(250.5));

    // The legacy serial-kernel kind has the same layout.
    k.kind = CUPTI_ACTIVITY_KIND_KERNEL;
    k.name = nullptr;
    auto legacy = to_record(as_activity(&k));
    REQUIRE(legacy);
    CHECK(legacy->name.empty());
}

TEST_CASE("CUPTI: memcpy records convert to ours with Kineto's names", "[cuda]") {
    auto m = memcpy_record(64 << 20, 5'000, 2'805'000);
    auto r = to_record(as_activity(&m));
    REQUIRE(r);
    CHECK(r->kind == ActivityKind::memcpy);
    CHECK(r->name == "Memcpy HtoD (Pinned -> Device)");
    CHECK(r->bytes == (64u << 20));
    CHECK(r->stream == 7);
    CHECK(r->duration_us() == Approx(2800.0));
    CHECK(memcpy_name(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                      CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE) == "Memcpy DtoH (Device -> Pageable)");
    CHECK(memcpy_name(200, 200, 200) == "Memcpy Unknown (Unknown -> Unknown)");
}

TEST_CASE("CUPTI: other record kinds and null are skipped", "[cuda]") {
    CuptiKernelRecord other;
    std::memset(&other, 0, sizeof other);
    other.kind = CUPTI_ACTIVITY_KIND_DRIVER;
    CHECK_FALSE(to_record(as_activity(&other)));
    CHECK_FALSE(to_record(nullptr));
}

TEST_CASE("CUPTI: summarize_activity sums durations per kind", "[cuda]") {
    std::vector<ActivityRecord> records;
    for (auto k :
         {kernel_record("a", 1000, 3000, 1), kernel_record("b", 3000, 3500, 1), kernel_record("c", 10'000, 14'000, 2)})
        records.push_back(*to_record(as_activity(&k)));
    for (auto m : {memcpy_record(1000, 500, 1500), memcpy_record(3000, 20'000, 21'000)})
        records.push_back(*to_record(as_activity(&m)));
    auto s = summarize_activity(records);
    CHECK(s.kernels == 3);
    CHECK(s.memcpys == 2);
    CHECK(s.kernel_us == Approx(2.0 + 0.5 + 4.0));
    CHECK(s.memcpy_us == Approx(2.0));
    CHECK(s.memcpy_bytes == 4000);
    CHECK(s.span_us == Approx(20.5));  // 500 ns to 21000 ns

    auto empty = summarize_activity({});
    CHECK(empty.kernels == 0);
    CHECK(empty.span_us == 0);
}

TEST_CASE("CUDA backend: entry points report a missing device cleanly", "[cuda]") {
    const std::string why = cuda_unavailable_reason();
    // NCCL's version needs no device.
    CHECK_THAT(nccl_provenance(), Catch::StartsWith("nccl "));
    const RepeatPolicy quick{1, 3, 5, 0.01};
    const std::vector<GemmShape> shapes{{256, 256, 256}, {512, 1024, 256}};

    if (!why.empty()) {
        CHECK_THAT(why, Catch::StartsWith("no CUDA device"));
        CHECK_FALSE(calib::cuda::query_devices().error.empty());
        auto gemm = bench_cublas_gemm(shapes, DType::bf16, quick, {});
        CHECK_FALSE(gemm.ok());
        CHECK(gemm.error == why);
        auto copies = bench_host_copies(1 << 20, quick);
        CHECK_FALSE(copies.ok());
        CHECK_THAT(copies.error, Catch::StartsWith("no CUDA device"));
        CollectiveSweep sweep;
        sweep.kinds = {calib::CollectiveKind::allreduce};
        CHECK_FALSE(bench_nccl_collectives(sweep, quick, {}).ok());
        CHECK_FALSE(bench_cuda_overlap(true, quick).ok());
        WARN("CUDA backend run-time checks skipped: no GPU (" << why << ")");
        return;
    }

    // A GPU is present: the single-process benchmarks measure something sane.
    for (DType dtype : {DType::fp32, DType::bf16}) {
        auto gemm = bench_cublas_gemm(shapes, dtype, quick, {});
        INFO(gemm.error);
        REQUIRE(gemm.ok());
        REQUIRE(gemm.value->size() == 2);
        for (const auto& p : *gemm.value) CHECK(p.time_us > 0);
    }
    auto copies = bench_host_copies(16 << 20, quick);
    INFO(copies.error);
    REQUIRE(copies.ok());
    CHECK(copies.value->h2d_pinned_gbps > 0);
    CHECK(copies.value->d2h_pageable_gbps > 0);

    // CUPTI sees our copies on a real device.
    ActivityCollector collector;
    REQUIRE(collector.start().empty());
    auto again = bench_host_copies(1 << 20, quick);
    auto records = collector.stop();
    REQUIRE(again.ok());
    CHECK(summarize_activity(records).memcpys > 0);
}

#endif  // DTSIM_HAVE_CUDA
