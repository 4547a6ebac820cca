// The CPU backend's elementwise kernel: what the executor runs for every
// non-GEMM op (and for explicit passes such as the optimizer step), and what
// the calibration's streaming bandwidth measures, so that both see the same
// loop over the same memory footprint.
#pragma once

#include <cstdint>
#include <vector>

namespace dtsim::profiler {

// The most scratch a pass streams through; larger passes go over it again.
// Larger than the last-level cache of the machines we run on per rank, so a
// long pass runs at memory bandwidth.
inline constexpr std::int64_t kMemoryPassScratchBytes = 32LL << 20;

// Moves `bytes` through `scratch` (first half read, second half written: 8
// bytes per element), chunk by chunk when `bytes` exceeds it. Not inlined: a
// tiny pass pays a call, as a kernel launch would.
[[gnu::noinline]] void memory_pass(std::int64_t bytes, std::vector<float>& scratch);

}  // namespace dtsim::profiler
