#include "dtsim/runtime/cpu_kernels.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>

#include <unistd.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define DTSIM_ADAM_AVX2 1
#endif

namespace dtsim::runtime {

namespace {

struct AdamStep {
    float lr, beta1, beta2, eps, weight_decay;
    float bias1, bias2;  // 1 / (1 - beta^t): bias corrections
};

// p <- p - lr * (m_hat / (sqrt(v_hat) + eps) + wd * p), with the moments updated first.
void adam_scalar(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
                 std::size_t begin, std::size_t n, const AdamStep& s) {
    for (std::size_t i = begin; i < n; ++i) {
        const float mi = s.beta1 * m[i] + (1.0f - s.beta1) * g[i];
        const float vi = s.beta2 * v[i] + (1.0f - s.beta2) * g[i] * g[i];
        m[i] = mi;
        v[i] = vi;
        p[i] -= s.lr * (mi * s.bias1 / (std::sqrt(vi * s.bias2) + s.eps) + s.weight_decay * p[i]);
    }
}

#ifdef DTSIM_ADAM_AVX2
// The same update 8 lanes at a time. Plain loops do not vectorise here: sqrt may
// set errno, so compilers keep it scalar without -fno-math-errno.
[[gnu::target("avx2,fma")]] void adam_avx2(float* __restrict p, const float* __restrict g, float* __restrict m,
                                           float* __restrict v, std::size_t n, const AdamStep& s) {
    const __m256 b1 = _mm256_set1_ps(s.beta1), nb1 = _mm256_set1_ps(1.0f - s.beta1);
    const __m256 b2 = _mm256_set1_ps(s.beta2), nb2 = _mm256_set1_ps(1.0f - s.beta2);
    const __m256 c1 = _mm256_set1_ps(s.bias1), c2 = _mm256_set1_ps(s.bias2);
    const __m256 eps = _mm256_set1_ps(s.eps), lr = _mm256_set1_ps(s.lr), wd = _mm256_set1_ps(s.weight_decay);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 gi = _mm256_loadu_ps(g + i);
        const __m256 mi = _mm256_fmadd_ps(b1, _mm256_loadu_ps(m + i), _mm256_mul_ps(nb1, gi));
        const __m256 vi = _mm256_fmadd_ps(b2, _mm256_loadu_ps(v + i), _mm256_mul_ps(nb2, _mm256_mul_ps(gi, gi)));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        const __m256 denom = _mm256_add_ps(_mm256_sqrt_ps(_mm256_mul_ps(vi, c2)), eps);
        const __m256 pi = _mm256_loadu_ps(p + i);
        const __m256 update = _mm256_fmadd_ps(wd, pi, _mm256_div_ps(_mm256_mul_ps(mi, c1), denom));
        _mm256_storeu_ps(p + i, _mm256_fnmadd_ps(lr, update, pi));
    }
    adam_scalar(p, g, m, v, i, n, s);
}
#endif

}  // namespace

std::int64_t memory_pass_scratch_bytes(std::int64_t llc_bytes) {
    constexpr std::int64_t kMiB = 1LL << 20;
    const std::int64_t llc = llc_bytes > 0 ? llc_bytes : 32 * kMiB;
    return std::clamp(4 * llc, 64 * kMiB, 512 * kMiB);
}

std::int64_t memory_pass_scratch_bytes() {
    // The kernel's view (sysfs: one instance of the highest cache level). glibc's
    // sysconf reads CPUID and can be far off in a VM: 320 MiB of L3 on the
    // development machine, whose streams slow down beyond 32 MiB as sysfs says.
    static const std::int64_t bytes = [] {
        std::int64_t llc = 0;
        for (int index = 0; index < 8; ++index) {
            const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
            std::ifstream level(dir + "/level"), size(dir + "/size");
            int l = 0;
            std::int64_t kib = 0;
            std::string unit;
            if (!(level >> l) || !(size >> kib)) break;
            size >> unit;  // "32768K" reads as 32768 then "K"
            const std::int64_t b = kib * (unit == "M" ? 1LL << 20 : unit == "K" ? 1LL << 10 : 1);
            if (l >= 2 && b > 0) llc = b;  // the last level listed wins
        }
#ifdef _SC_LEVEL3_CACHE_SIZE
        if (llc <= 0) llc = std::max<long>(sysconf(_SC_LEVEL3_CACHE_SIZE), 0);
#endif
        return memory_pass_scratch_bytes(llc);
    }();
    return bytes;
}

void memory_pass(std::int64_t bytes, Floats& scratch) {
    const auto half = static_cast<std::int64_t>(scratch.size()) / 2;
    if (half == 0 || bytes <= 0) return;
    const float* src = scratch.data();
    float* dst = scratch.data() + half;
    for (std::int64_t left = std::max<std::int64_t>(1, bytes / 8); left > 0; left -= half) {
        const std::int64_t n = std::min(half, left);
        for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i] * 0.999f + 0.001f;
    }
}

void update_pass(std::int64_t bytes, Floats& scratch) {
    const auto half = static_cast<std::int64_t>(scratch.size()) / 2;
    if (half == 0 || bytes <= 0) return;
    float* p = scratch.data();
    const float* g = scratch.data() + half;
    for (std::int64_t left = std::max<std::int64_t>(1, bytes / 12); left > 0; left -= half) {
        const std::int64_t n = std::min(half, left);
        for (std::int64_t i = 0; i < n; ++i) p[i] -= 1e-6f * g[i];
    }
}

void copy_pass(std::int64_t bytes, Floats& scratch) {
    const auto half = static_cast<std::int64_t>(scratch.size()) / 2;
    if (half == 0 || bytes <= 0) return;
    for (std::int64_t left = std::max<std::int64_t>(1, bytes / 4); left > 0; left -= half) {
        const std::int64_t n = std::min(half, left);
        std::memcpy(scratch.data() + half, scratch.data(), static_cast<std::size_t>(n) * sizeof(float));
    }
}

void adam_pass(std::int64_t elements, Floats& scratch, int step) {
    const auto chunk = static_cast<std::int64_t>(scratch.size()) / 4;
    if (chunk == 0 || elements <= 0) return;
    const AdamStep s{1e-3f,
                     0.9f,
                     0.999f,
                     1e-8f,
                     0.01f,
                     static_cast<float>(1.0 / (1.0 - std::pow(0.9, std::max(1, step)))),
                     static_cast<float>(1.0 / (1.0 - std::pow(0.999, std::max(1, step))))};
#ifdef DTSIM_ADAM_AVX2
    static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    float* p = scratch.data();
    float* g = p + chunk;
    float* m = g + chunk;
    float* v = m + chunk;
    for (std::int64_t left = elements; left > 0; left -= chunk) {
        const auto n = static_cast<std::size_t>(std::min(chunk, left));
#ifdef DTSIM_ADAM_AVX2
        if (avx2) {
            adam_avx2(p, g, m, v, n, s);
            continue;
        }
#endif
        adam_scalar(p, g, m, v, 0, n, s);
    }
}

void sgemm(GemmLayout layout, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b,
           float* c) {
    const bool ta = layout == GemmLayout::tn, tb = layout == GemmLayout::nt;
    const auto bm = static_cast<blasint>(m), bn = static_cast<blasint>(n), bk = static_cast<blasint>(k);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, bm, bn, bk, 1.0f, a,
                ta ? bm : bk, b, tb ? bk : bn, 0.0f, c, bn);
}

}  // namespace dtsim::runtime
