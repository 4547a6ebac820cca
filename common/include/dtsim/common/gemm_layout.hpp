// Which operands of a GEMM are transposed, in row-major terms (C = op(A) op(B)),
// as the framework hands them to the BLAS. torch's nn.Linear computes x W^T in
// forward (NT), dX = dY W in backward (NN) and dW = dY^T X (TN); HuggingFace's
// GPT-2 Conv1D computes x W (NN). BLAS libraries run the three at different
// rates (OpenBLAS and MKL pack a transposed operand differently; cuBLAS picks
// other kernels), so the calibration measures each and the cost model prices
// each GEMM at its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace dtsim {

enum class GemmLayout : std::uint8_t { nn, nt, tn };

constexpr std::string_view to_string(GemmLayout l) {
    return l == GemmLayout::nt ? "nt" : l == GemmLayout::tn ? "tn" : "nn";
}

constexpr std::optional<GemmLayout> gemm_layout_from_string(std::string_view s) {
    if (s == "nn") return GemmLayout::nn;
    if (s == "nt") return GemmLayout::nt;
    if (s == "tn") return GemmLayout::tn;
    return std::nullopt;
}

// The layouts of a GEMM's two backward GEMMs. For C = A op(B): the input
// gradient dA = dC op(B)^T flips B's transpose (NT forward: NN; NN forward:
// NT), and the weight gradient is always A^T dC (TN).
constexpr GemmLayout input_grad_layout(GemmLayout forward) {
    return forward == GemmLayout::nt ? GemmLayout::nn : GemmLayout::nt;
}
constexpr GemmLayout weight_grad_layout(GemmLayout) {
    return GemmLayout::tn;
}

}  // namespace dtsim
