#include "dtsim/profiler/memory_pass.hpp"

#include <algorithm>

namespace dtsim::profiler {

void memory_pass(std::int64_t bytes, std::vector<float>& scratch) {
    const auto half = static_cast<std::int64_t>(scratch.size()) / 2;
    if (half == 0 || bytes <= 0) return;
    const float* src = scratch.data();
    float* dst = scratch.data() + half;
    for (std::int64_t left = std::max<std::int64_t>(1, bytes / 8); left > 0; left -= half) {
        const std::int64_t n = std::min(half, left);
        for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i] * 0.999f + 0.001f;
    }
}

}  // namespace dtsim::profiler
