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

// The dtsim process keeps the memory it frees for its next use. Each
// simulation builds a Plan whose vectors (tasks, dependencies, memory deltas)
// are hundreds of KiB; with glibc's defaults such blocks are fresh mmaps, or
// the heap's top is trimmed and grown again, and every simulation page-faults
// its buffers in 4 KiB at a time: 66,000 faults in 8 s of bench/sim_speed, and
// llama2-70b DDP ran 1.3-1.6x faster without them (bench/results/sim_speed.md).
// Sets glibc's mmap threshold to its largest value (32 MiB) and the trim
// threshold to 1 GiB. Call once, before other threads start. Idempotent.
void keep_freed_memory();

}  // namespace dtsim
