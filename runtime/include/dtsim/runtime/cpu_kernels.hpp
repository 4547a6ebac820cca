// The CPU backend's kernels: what the executor runs for elementwise ops,
// host copies and the CPU optimizer, and what the calibration times, so that
// both see the same loops over the same memory footprint. Each streams its
// bytes through a caller's scratch, chunk by chunk when they exceed it.
#pragma once

#include <cstdint>
#include "dtsim/common/gemm_layout.hpp"
#include "dtsim/runtime/huge_pages.hpp"

namespace dtsim::runtime {

// The most scratch a kernel streams through; larger work goes over it again.
// Four times the last-level cache (STREAM's rule for its arrays), so that a
// long pass runs at memory bandwidth, as a pass over a real tensor of that
// size does, and not at the cache's. On the development machine (32 MiB of L3
// shared by both ranks) a pass over a 32 MiB scratch read 38.7 GB/s against
// 22.0 GB/s over 256 MiB, and torch copies 128 MiB of gradients at about the
// latter. From `llc_bytes` (0: unknown, taken as 32 MiB), within 64-512 MiB.
std::int64_t memory_pass_scratch_bytes(std::int64_t llc_bytes);
// The same for this machine's last-level cache (sysconf), computed once.
std::int64_t memory_pass_scratch_bytes();

// Elementwise: moves `bytes` (first half of `scratch` read, second half
// written: 8 bytes per element). Not inlined: a tiny pass pays a call, as a
// kernel launch would.
[[gnu::noinline]] void memory_pass(std::int64_t bytes, Floats& scratch);

// An in-place update, as torch.optim.SGD's `p.add_(g, alpha=-lr)`: the first
// half of `scratch` read and written, the second read; `bytes` moved as the
// Plan counts them (12 per element: two reads and a write). Not inlined.
[[gnu::noinline]] void update_pass(std::int64_t bytes, Floats& scratch);

// A host copy: memcpy of `bytes` from the first half of `scratch` to the second.
void copy_pass(std::int64_t bytes, Floats& scratch);

// DeepSpeed CPUAdam's work: AdamW steps over `elements` fp32 parameters, with
// parameters, gradients and both moments as quarters of `scratch` (AVX2 and
// FMA where the CPU has them). `step` (>= 1) sets the bias corrections.
void adam_pass(std::int64_t elements, Floats& scratch, int step = 1);

// Row-major fp32 C[m,n] = op(A) op(B) through OpenBLAS with `layout`'s
// transposes, as torch hands nn.Linear's GEMMs to the BLAS: a transposed A is
// stored k x m, a transposed B n x k (the weight, out x in).
void sgemm(GemmLayout layout, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b, float* c);

}  // namespace dtsim::runtime
