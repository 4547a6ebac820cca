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
};

HostInfo host_info();

// "<host> (<CPU model>)": the machine a calibration records in its provenance.
std::string machine_name(const HostInfo& h);

// UTC now as ISO 8601, e.g. "2026-11-21T23:04:05Z".
std::string utc_timestamp();

}  // namespace dtsim::profiler
