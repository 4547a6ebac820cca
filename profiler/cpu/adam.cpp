// CPU optimizer microbenchmark: one AdamW step (fp32 params, grads and both
// moments) as DeepSpeed's CPUAdam does it: a fused, SIMD loop per element.
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/cpu_benchmarks.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define DTSIM_ADAM_AVX2 1
#endif

namespace dtsim::profiler {

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

double bench_cpu_adam_params_per_s(std::int64_t parameters, const RepeatPolicy& policy) {
    if (parameters <= 0)
        throw Error(fmt::format("the CPU Adam benchmark needs a positive parameter count, not {}", parameters));
    const auto n = static_cast<std::size_t>(parameters);
    std::vector<float> p(n), g(n), m(n, 0.0f), v(n, 0.0f);
    for (std::size_t i = 0; i < n; ++i) {
        p[i] = static_cast<float>(i % 1000) * 1e-3f - 0.5f;
        g[i] = static_cast<float>((i * 7) % 1000) * 1e-4f - 0.05f;
    }
#ifdef DTSIM_ADAM_AVX2
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    int t = 0;
    const Measurement meas = measure(policy, [&] {
        ++t;
        const AdamStep s{1e-3f,
                         0.9f,
                         0.999f,
                         1e-8f,
                         0.01f,
                         static_cast<float>(1.0 / (1.0 - std::pow(0.9, t))),
                         static_cast<float>(1.0 / (1.0 - std::pow(0.999, t)))};
        const auto start = std::chrono::steady_clock::now();
#ifdef DTSIM_ADAM_AVX2
        if (avx2)
            adam_avx2(p.data(), g.data(), m.data(), v.data(), n, s);
        else
#endif
            adam_scalar(p.data(), g.data(), m.data(), v.data(), 0, n, s);
        return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    });
    return static_cast<double>(parameters) / (meas.median_us * 1e-6);
}

}  // namespace dtsim::profiler
