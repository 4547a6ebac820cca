// The host's physical memory, for refusing up front work that could not fit
// (a sweep's configurations, an imported trace's events) with the estimate,
// instead of letting the kernel's OOM killer end the run half-way.
#pragma once

#include <cstdint>
#include <string>

namespace dtsim {

// Physical memory of this machine in bytes; 0 when the OS does not say.
// DTSIM_HOST_MEMORY_BYTES overrides it (tests use it to exercise the refusal
// without allocating gigabytes).
std::uint64_t host_memory_bytes();

// a * b, saturating at UINT64_MAX instead of wrapping.
std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b);

// Throws ConfigError "<what> needs about <need> but this machine has <total>:
// <advice>" when need exceeds fraction of the host's memory. Does nothing when
// the host's memory is unknown.
void check_fits_host_memory(std::uint64_t need, double fraction, const std::string& what,
                            const std::string& advice);

}  // namespace dtsim
