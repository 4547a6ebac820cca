// CPU backend microbenchmarks (OpenBLAS, memory, files, CPU Adam). Each runs on
// the calling rank alone; under mpirun every rank measures and rank 0 reports.
#pragma once

#include "dtsim/profiler/calibration.hpp"
#include "dtsim/profiler/measure.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dtsim::profiler {

struct GemmShape {
    std::int64_t m = 0, n = 0, k = 0;
    GemmLayout layout = GemmLayout::nn;  // the transposes to run it with
    auto operator<=>(const GemmShape&) const = default;
};

// The default grid of shapes (small to large, square and skinny); `quick` is a
// few shapes for tests.
std::vector<GemmShape> default_gemm_shapes(bool quick);
// Shapes of that grid measured again as NT and TN, whose times against NN's
// give the curve's layout ratios (nn.Linear's forward is NT, its weight
// gradient TN).
std::vector<GemmShape> layout_probe_shapes(bool quick);

// cblas_sgemm over `shapes` (fp32; one BLAS thread per rank), each with its
// layout's transposes: a measured GemmPoint per shape.
std::vector<calib::GemmPoint> bench_gemm(std::span<const GemmShape> shapes, const RepeatPolicy& policy,
                                         const ProgressFn& progress);

struct MemoryResult {
    double stream_gbps = 0;         // a streaming read+write kernel (elementwise ops)
    double memcpy_gbps = 0;         // memcpy of large buffers (host copies)
    double kernel_overhead_us = 0;  // the cost of a tiny pass (call overhead)
    // An in-place update's counted bytes a second over stream_gbps's (DeviceSpec::in_place_speedup).
    double in_place_speedup = 1.0;
};
MemoryResult bench_memory(const RepeatPolicy& policy, const ProgressFn& progress);
// MemoryResult::stream_gbps alone.
double bench_stream_gbps(const RepeatPolicy& policy);

struct FileIoResult {
    double write_gbps = 0;
    double read_gbps = 0;
};
// Writes and reads a real file of `bytes` in `directory` (fsync'ed writes,
// reads after dropping it from the cache where possible); removes it after.
FileIoResult bench_file_io(const std::string& directory, std::int64_t bytes, const RepeatPolicy& policy);

// The rate at which memory fresh from the OS is first written, beyond the
// cost of writing memory already mapped: page faults and the kernel's zeroing.
// torch on CPU frees its gradients every step (zero_grad(set_to_none=True)),
// glibc hands large freed blocks back to the OS, and the next backward writes
// new pages. Each sample maps `bytes` anonymous memory, writes it, unmaps it.
double bench_first_touch_gbps(std::int64_t bytes, const RepeatPolicy& policy);

// A real Adam update (fp32 params, grads, m, v) over `parameters` elements.
double bench_cpu_adam_params_per_s(std::int64_t parameters, const RepeatPolicy& policy);

// How host work (memory passes on a normal-priority thread, as the executor's
// copies and CPU optimizer) and compute (at the executor's compute priority)
// slow each other on this rank's core; fills spec's host fields. Every rank
// calls it (the figures are means over ranks).
void bench_host_overlap(bool quick, const RepeatPolicy& policy, calib::OverlapSpec& spec);

}  // namespace dtsim::profiler
