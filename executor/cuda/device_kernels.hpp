// The CUDA executor's own kernels (device_kernels.cu): filling scratch buffers
// and replaying a non-GEMM op as a memory pass. Included by nvcc (C++17) and by
// the C++20 sources alike, so plain declarations only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dtsim::executor::cuda {

// Writes `pattern` to `words` 32-bit words (a float or two 16-bit values).
cudaError_t launch_fill_words(void* dst, std::size_t words, std::uint32_t pattern, cudaStream_t stream);

// Which 16- or 32-bit format launch_fill_random writes.
enum class FillFormat : int { fp32 = 0, bf16 = 1, fp16 = 2 };

// Fills `words` 32-bit words with pseudo-random values uniform in [-1, 1) in
// `format` (one float or two 16-bit values per word), the same for every
// `seed`. GEMM operands need such data: constant or zero operands draw less
// power and let the clocks run higher than on a model's real tensors.
cudaError_t launch_fill_random(void* dst, std::size_t words, FillFormat format, std::uint32_t seed,
                               cudaStream_t stream);

// Reads `elements` floats from the first half of `buf` and writes them to the
// second half (`half` floats each), wrapping around when `elements` > `half`:
// 8 bytes of traffic per element, the CPU backend's memory_pass on the GPU.
cudaError_t launch_memory_pass(float* buf, std::size_t half, std::size_t elements, cudaStream_t stream);

}  // namespace dtsim::executor::cuda
