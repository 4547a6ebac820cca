// What machine and libraries a calibration was measured with (its provenance).
#pragma once

#include <cstdint>
#include <string>

namespace dtsim::profiler {

struct HostInfo {
    std::string hostname;
    std::string cpu_model;
    std::int64_t memory_bytes = 0;  // physical memory of the host
    std::string blas;               // OpenBLAS's build configuration
    std::string mpi;                // MPI library version (when MPI is initialised)
    std::string openblas_coretype;  // OPENBLAS_CORETYPE, which changes sgemm speed
    std::string blas_core;          // the kernels OpenBLAS picked at run time (openblas_get_corename)
    bool cpu_avx2 = false, cpu_avx512 = false;
};

HostInfo host_info();

// One sentence when OpenBLAS runs pre-AVX2 kernels (Prescott, Nehalem, ...) on
// a CPU that has AVX2: an OpenBLAS older than the processor does not recognise
// it and falls back to its generic kernels (Debian 12's 0.3.21 on recent Xeons
// picks Prescott), and every GEMM of calibrate and execute runs 2-3 times
// slower than the AVX2 or AVX-512 kernels would. Empty otherwise.
std::string blas_kernel_warning(const HostInfo& h);

// "<host> (<CPU model>)": the machine a calibration records in its provenance.
std::string machine_name(const HostInfo& h);

// UTC now as ISO 8601, e.g. "2026-11-21T23:04:05Z".
std::string utc_timestamp();

}  // namespace dtsim::profiler
