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
// As large as the whole last-level cache of the development machine (32 MiB,
// shared by its ranks), so a long pass runs at about memory bandwidth.
inline constexpr std::int64_t kMemoryPassScratchBytes = 32LL << 20;

// Elementwise: moves `bytes` (first half of `scratch` read, second half
// written: 8 bytes per element). Not inlined: a tiny pass pays a call, as a
// kernel launch would.
[[gnu::noinline]] void memory_pass(std::int64_t bytes, Floats& scratch);

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
