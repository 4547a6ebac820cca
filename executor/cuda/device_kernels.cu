// Fill and memory-pass kernels (device_kernels.hpp): grid-stride loops over a
// capped grid, so one launch covers any size.
#include "device_kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace dtsim::executor::cuda {
namespace {

constexpr unsigned kThreads = 256;
constexpr std::size_t kMaxBlocks = 8192;

unsigned blocks_for(std::size_t elements) {
    const std::size_t b = (elements + kThreads - 1) / kThreads;
    return static_cast<unsigned>(b < kMaxBlocks ? (b > 0 ? b : 1) : kMaxBlocks);
}

__global__ void fill_words_kernel(std::uint32_t* dst, std::size_t words, std::uint32_t pattern) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride)
        dst[i] = pattern;
}

// splitmix32-style mixing of an index: uniform bits, no state.
__device__ std::uint32_t mix(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return static_cast<std::uint32_t>((x ^ (x >> 31)) >> 32);
}

__device__ float uniform(std::uint64_t i, std::uint32_t seed) {
    // 24 random bits to [-1, 1).
    return static_cast<float>(mix(i ^ (static_cast<std::uint64_t>(seed) << 40)) >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void fill_random_kernel(std::uint32_t* dst, std::size_t words, int format, std::uint32_t seed) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride) {
        if (format == 0) {
            dst[i] = __float_as_uint(uniform(i, seed));
        } else if (format == 1) {
            const __nv_bfloat16 lo = __float2bfloat16(uniform(2 * i, seed));
            const __nv_bfloat16 hi = __float2bfloat16(uniform(2 * i + 1, seed));
            dst[i] = static_cast<std::uint32_t>(__bfloat16_as_ushort(lo)) |
                     (static_cast<std::uint32_t>(__bfloat16_as_ushort(hi)) << 16);
        } else {
            const __half lo = __float2half(uniform(2 * i, seed));
            const __half hi = __float2half(uniform(2 * i + 1, seed));
            dst[i] = static_cast<std::uint32_t>(__half_as_ushort(lo)) |
                     (static_cast<std::uint32_t>(__half_as_ushort(hi)) << 16);
        }
    }
}

// Chunk by chunk of `half` elements, as the CPU pass streams through its scratch;
// rounds overlap harmlessly (every write depends only on the unchanged first half).
__global__ void memory_pass_kernel(float* buf, std::size_t half, std::size_t elements) {
    const float* src = buf;
    float* dst = buf + half;
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    for (std::size_t base = 0; base < elements; base += half) {
        const std::size_t n = elements - base < half ? elements - base : half;
        for (std::size_t i = first; i < n; i += stride) dst[i] = src[i] * 0.999f + 0.001f;
    }
}

}  // namespace

cudaError_t launch_fill_words(void* dst, std::size_t words, std::uint32_t pattern, cudaStream_t stream) {
    if (words == 0) return cudaSuccess;
    fill_words_kernel<<<blocks_for(words), kThreads, 0, stream>>>(static_cast<std::uint32_t*>(dst), words, pattern);
    return cudaGetLastError();
}

cudaError_t launch_fill_random(void* dst, std::size_t words, FillFormat format, std::uint32_t seed,
                               cudaStream_t stream) {
    if (words == 0) return cudaSuccess;
    fill_random_kernel<<<blocks_for(words), kThreads, 0, stream>>>(static_cast<std::uint32_t*>(dst), words,
                                                                   static_cast<int>(format), seed);
    return cudaGetLastError();
}

cudaError_t launch_memory_pass(float* buf, std::size_t half, std::size_t elements, cudaStream_t stream) {
    if (half == 0 || elements == 0) return cudaSuccess;
    memory_pass_kernel<<<blocks_for(elements < half ? elements : half), kThreads, 0, stream>>>(buf, half, elements);
    return cudaGetLastError();
}

}  // namespace dtsim::executor::cuda
