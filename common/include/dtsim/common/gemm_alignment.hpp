// How aligned a GEMM's operands are, as cuBLAS's choice of kernel family sees
// it (bench/results/cuda.md §8). nn.Linear's layouts make the two feature
// dimensions (n and k of the forward GEMM) the leading dimensions of every
// operand of its three GEMMs; the token dimension is none of them.
#pragma once

#include "dtsim/common/dtype.hpp"

#include <cstdint>

namespace dtsim {

// The largest power of two, up to 8, dividing both n and k (elements).
constexpr std::int32_t gemm_alignment(std::int64_t n, std::int64_t k) {
    std::int32_t a = 1;
    while (a < 8 && n % (2 * a) == 0 && k % (2 * a) == 0) a *= 2;
    return a;
}

// The kernel family it picks: 0 for 16-byte multiples (full speed), 1 for 4-8
// bytes (cutlass_80 align2 on Hopper), 2 for 2 bytes (cutlass_75 align1).
constexpr int gemm_alignment_class(std::int32_t align_elements, DType dtype) {
    const std::int64_t bytes = std::int64_t{align_elements} * dtype_bytes(dtype);
    return bytes >= 16 ? 0 : bytes >= 4 ? 1 : 2;
}

}  // namespace dtsim
