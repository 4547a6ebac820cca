// CUDA backend microbenchmarks: cuBLAS GEMMs timed from CUPTI activity
// records, NCCL collectives bootstrapped over MPI, host<->device copies and
// compute slowdown under a concurrent allreduce. Compiled whenever the CUDA
// toolkit is found; every entry point returns an error message instead of a
// value where no usable device is present (no driver, no GPU) and never crashes.
#pragma once

#include "dtsim/common/dtype.hpp"
#include "dtsim/profiler/calibration.hpp"
#include "dtsim/profiler/collective_benchmarks.hpp"
#include "dtsim/profiler/cpu_benchmarks.hpp"
#include "dtsim/profiler/measure.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace dtsim::profiler::cuda {

// A value, or why there is none ("no CUDA device: cudaErrorInsufficientDriver: ...").
template <class T>
struct CudaResult {
    std::optional<T> value;
    std::string error;
    bool ok() const { return value.has_value(); }
    explicit operator bool() const { return ok(); }
};

// Empty when device 0 can be used; otherwise a sentence starting "no CUDA device".
std::string cuda_unavailable_reason();

// cublasSgemm (fp32) or cublasGemmEx (bf16 inputs, fp32 accumulate) over
// `shapes`; times are device times of the cuBLAS kernels from CUPTI (CUDA
// events where CUPTI is unavailable).
CudaResult<std::vector<calib::GemmPoint>> bench_cublas_gemm(std::span<const GemmShape> shapes, DType dtype,
                                                            const RepeatPolicy& policy, const ProgressFn& progress);

// NCCL's version and every NCCL_* environment variable, for provenance:
// "nccl 2.28.9; NCCL_IB_HCA=mlx5; NCCL_DEBUG=WARN". Needs no device.
std::string nccl_provenance();

struct NcclSweepResult {
    std::vector<CollectiveRow> rows;  // like bench_mpi_collectives: the slowest rank per iteration
    std::string provenance;           // nccl_provenance()
};

// NCCL collectives over MPI_COMM_WORLD (MPI must be initialised; every rank
// calls). Rank 0 creates the unique id and broadcasts it over MPI; each rank
// uses device local_rank % device_count. Sizes sweep as the CPU driver does.
CudaResult<NcclSweepResult> bench_nccl_collectives(const CollectiveSweep& sweep, const RepeatPolicy& policy,
                                                   const ProgressFn& progress);

struct HostCopyResult {
    double h2d_pinned_gbps = 0;
    double d2h_pinned_gbps = 0;
    double h2d_pageable_gbps = 0;
    double d2h_pageable_gbps = 0;
};
// cudaMemcpy of `bytes` between device memory and pinned / pageable host memory.
CudaResult<HostCopyResult> bench_host_copies(std::int64_t bytes, const RepeatPolicy& policy);

// Device-to-device cudaMemcpy of `bytes`: the streaming bandwidth in GB/s,
// counting the bytes read and the bytes written, as the memory-pass model does.
CudaResult<double> bench_device_copy(std::int64_t bytes, const RepeatPolicy& policy);

// The GEMM grid for a GPU: the CPU grid plus the shapes training runs at on a
// GPU (thousands of tokens by hidden sizes of 4096-8192), so that the fitted
// curve reaches the plateau a model's GEMMs sit on instead of extrapolating to it.
std::vector<GemmShape> gpu_gemm_shapes(bool quick);

// GEMMs on one stream alone and while another stream runs large NCCL
// allreduces (and the reverse). Every rank of MPI_COMM_WORLD calls it.
CudaResult<calib::OverlapSpec> bench_cuda_overlap(bool quick, const RepeatPolicy& policy);

}  // namespace dtsim::profiler::cuda
