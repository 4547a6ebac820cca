// Fitting measured points to the Calibration's curves. The GEMM efficiency
// formula mirrors sim/cost_model.cpp (the profiler does not link the
// simulator); the bus-bandwidth factor is calib::busbw_factor, shared.
#include "dtsim/profiler/fit.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/gemm_alignment.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

namespace dtsim::profiler {

namespace {

using calib::CollectiveKind;

// Weighted least-squares line through the origin: t = b x.
double slope_through_origin(const std::vector<double>& x, const std::vector<double>& t, const std::vector<double>& w) {
    double sxt = 0, sxx = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        sxt += w[i] * x[i] * t[i];
        sxx += w[i] * x[i] * x[i];
    }
    return sxx > 0 ? sxt / sxx : 0;
}

// GEMM fit: the half-efficiency dimensions are searched in s = log2(1 + half),
// so that s = 0 is "no penalty" and the grid is even in log space.
constexpr double kMaxLogHalf = 15.0;  // half dimensions up to 32767

struct GemmSample {
    double m, n, k;
    double ideal_us;  // the time at peak, efficiency 1
    double time_us;   // measured
};

struct GemmFit {
    double max_efficiency = 1;
    std::array<double, 3> s{};                             // log2(1 + half) for m, n, k
    double sse = std::numeric_limits<double>::infinity();  // sum of squared relative errors
};

double half_of(double s) {
    return std::exp2(s) - 1.0;
}

// For given halves the best max_efficiency has a closed form: predicted times
// are q_i * t_i / max_eff, so u = 1 / max_eff minimises sum (u q_i - 1)^2 at
// u = sum q / sum q^2; max_eff <= 1 clamps u >= 1 (the objective is convex in
// u). Without the clamp, u rescales the peak instead (see fit_gemm_curve).
GemmFit evaluate(const std::vector<GemmSample>& samples, const std::array<double, 3>& s, bool clamp) {
    const double hm = half_of(s[0]), hn = half_of(s[1]), hk = half_of(s[2]);
    double sq = 0, sqq = 0;
    for (const auto& p : samples) {
        const double shape_eff = p.m / (p.m + hm) * (p.n / (p.n + hn)) * (p.k / (p.k + hk));
        const double q = p.ideal_us / shape_eff / p.time_us;
        sq += q;
        sqq += q * q;
    }
    const double u = clamp ? std::max(1.0, sq / sqq) : sq / sqq;
    // sum (u q - 1)^2 = u^2 sqq - 2 u sq + N
    const double sse = std::max(0.0, u * u * sqq - 2 * u * sq + static_cast<double>(samples.size()));
    return {1.0 / u, s, sse};
}

}  // namespace

calib::CollectiveCurve fit_collective(calib::CollectiveKind kind, calib::LinkScope scope, int group_size,
                                      std::span<const calib::CollectivePoint> points) {
    if (group_size < 2)
        throw Error(fmt::format("cannot fit a {} curve for a group of {} ranks: collectives need at least 2",
                                calib::to_string(kind), group_size));
    if (points.empty())
        throw Error(fmt::format("cannot fit a {} curve for {} ranks: there are no measured points",
                                calib::to_string(kind), group_size));
    calib::CollectiveCurve curve;
    curve.kind = kind;
    curve.scope = scope;
    curve.group_size = group_size;
    curve.points.assign(points.begin(), points.end());
    std::sort(curve.points.begin(), curve.points.end(),
              [](const auto& a, const auto& b) { return a.size_bytes < b.size_bytes; });

    const double factor = calib::busbw_factor(kind, group_size);
    std::vector<double> x, t, w;
    for (const auto& p : curve.points) {
        if (p.size_bytes < 0 || !(p.time_us > 0) || !std::isfinite(p.time_us))
            throw Error(fmt::format("cannot fit a {} curve: the point of {} bytes has time {} us (must be positive)",
                                    calib::to_string(kind), p.size_bytes, p.time_us));
        x.push_back(static_cast<double>(p.size_bytes) * factor);
        t.push_back(p.time_us);
        w.push_back(1.0 / (p.time_us * p.time_us));  // relative error: small and large sizes count alike
    }

    // Weighted normal equations for t = a + b x.
    double sw = 0, sx = 0, st = 0, sxx = 0, sxt = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        sw += w[i];
        sx += w[i] * x[i];
        st += w[i] * t[i];
        sxx += w[i] * x[i] * x[i];
        sxt += w[i] * x[i] * t[i];
    }
    const double det = sw * sxx - sx * sx;
    double a = 0, b = 0;
    if (det > 1e-12 * sw * sxx) {
        a = (sxx * st - sx * sxt) / det;
        b = (sw * sxt - sx * st) / det;
    }
    // A negative latency, a non-positive slope (noise over a narrow range) or a
    // single size: fall back to a line through the origin, always positive.
    if (!(a >= 0) || !(b > 0)) {
        a = 0;
        b = slope_through_origin(x, t, w);
    }
    if (!(b > 0)) {
        // Only zero-byte points: all latency, bandwidth unobserved.
        a = st / sw;
        b = 0;
    }
    curve.latency_us = a;
    curve.step_latency_us = 0;
    // b is us per byte: bytes / us = 1 / b, and GB/s = bytes / ns = 1 / (b * 1e3).
    curve.bus_bw_gbps = b > 0 ? 1.0 / (b * 1e3) : 0;

    double err = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double rel = (a + b * x[i]) / t[i] - 1.0;
        err += rel * rel;
    }
    curve.fit_error = std::sqrt(err / static_cast<double>(x.size()));
    // The calibration reader's bounds (calibration_json.cpp): a curve past them
    // would be written into a calibration that dtsim then refuses to read.
    if (curve.bus_bw_gbps > 1e6 || curve.latency_us > 1e9 || !(curve.fit_error <= 1e6))
        throw Error(fmt::format("the {} points on {} ranks imply a bus bandwidth of {:.0f} GB/s, a latency of {:g} us "
                                "and a fit error of {:g}: no link reaches 1 PB/s and no collective takes 1,000 s; "
                                "check that sizes are in bytes and times in microseconds",
                                calib::to_string(kind), group_size, curve.bus_bw_gbps, curve.latency_us,
                                curve.fit_error));
    return curve;
}

// peak_tflops <= 0: estimate the peak (CPU backends have no datasheet peak).
// Only peak * max_efficiency is identifiable from times, so the product is
// fitted freely and reported as the peak with max_efficiency = 1: the peak is
// the rate the fitted curve reaches for very large GEMMs, a little above the
// best measured rate. (Fixing the peak at the best measured rate with
// max_efficiency <= 1 would bias the curve: the best shape is itself below
// the asymptote, so the halves would be fitted too small.)
calib::GemmCurve fit_gemm_curve(DType dtype, double peak_tflops, std::span<const calib::GemmPoint> points,
                                bool alignment_classes) {
    std::vector<GemmSample> samples;
    // Misaligned shapes run other kernel families: kept out of the shape fit,
    // they give each family its ratio to the fitted curve.
    std::array<std::vector<GemmSample>, 3> by_family;
    // Transposed layouts likewise: each gives its layout's ratio to NN.
    std::vector<const calib::GemmPoint*> transposed;
    double best_tflops = 0;
    for (const auto& p : points) {
        if (p.dtype != dtype) continue;
        if (p.m <= 0 || p.n <= 0 || p.k <= 0 || p.batch <= 0 || !(p.time_us > 0) || !std::isfinite(p.time_us))
            throw Error(fmt::format("cannot fit a {} GEMM curve: the point {}x{}x{} (batch {}) has time {} us",
                                    to_string(dtype), p.m, p.n, p.k, p.batch, p.time_us));
        if (p.layout != GemmLayout::nn) {
            transposed.push_back(&p);
            continue;
        }
        const int family = alignment_classes ? gemm_alignment_class(gemm_alignment(p.n, p.k), dtype) : 0;
        // Batched GEMMs fill the machine like one with batch times the rows (as the cost model prices them).
        const double rows = static_cast<double>(p.m) * static_cast<double>(p.batch);
        const double flops = 2.0 * rows * static_cast<double>(p.n) * static_cast<double>(p.k);
        const GemmSample sample{rows, static_cast<double>(p.n), static_cast<double>(p.k), flops, p.time_us};
        by_family[static_cast<std::size_t>(family)].push_back(sample);
        if (family != 0) continue;
        best_tflops = std::max(best_tflops, flops / (p.time_us * 1e6));
        samples.push_back(sample);
    }
    if (samples.empty())
        throw Error(
            fmt::format("cannot fit a {} GEMM curve: there are no measured {} points with aligned "
                        "dimensions (n and k multiples of 16 bytes)",
                        to_string(dtype), to_string(dtype)));
    const bool estimate_peak = !(peak_tflops > 0);
    double peak = estimate_peak ? best_tflops : peak_tflops;  // provisional when estimated
    for (auto& s : samples) s.ideal_us = s.ideal_us / (peak * 1e6);

    // Coarse grid: s in [0, kMaxLogHalf] by 0.5 for each of the three halves.
    GemmFit best;
    constexpr int kSteps = static_cast<int>(2 * kMaxLogHalf) + 1;
    for (int i = 0; i < kSteps; ++i)
        for (int j = 0; j < kSteps; ++j)
            for (int l = 0; l < kSteps; ++l) {
                const GemmFit f = evaluate(samples, {0.5 * i, 0.5 * j, 0.5 * l}, !estimate_peak);
                if (f.sse < best.sse) best = f;
            }
    // Coordinate refinement with a shrinking step.
    for (double step = 0.25; step > 1e-4; step *= 0.5) {
        bool improved = true;
        while (improved) {
            improved = false;
            for (std::size_t d = 0; d < 3; ++d)
                for (const double dir : {-1.0, 1.0}) {
                    auto s = best.s;
                    s[d] = std::clamp(s[d] + dir * step, 0.0, kMaxLogHalf);
                    const GemmFit f = evaluate(samples, s, !estimate_peak);
                    if (f.sse < best.sse * (1 - 1e-12)) {
                        best = f;
                        improved = true;
                    }
                }
        }
    }

    if (estimate_peak) {
        peak *= best.max_efficiency;
        best.max_efficiency = 1;
    }
    calib::GemmCurve curve;
    curve.dtype = dtype;
    curve.peak_tflops = peak;
    curve.max_efficiency = best.max_efficiency;
    curve.half_m = half_of(best.s[0]);
    curve.half_n = half_of(best.s[1]);
    curve.half_k = half_of(best.s[2]);
    curve.fit_error = std::sqrt(best.sse / static_cast<double>(samples.size()));
    // The fitted curve's time for an aligned NN GEMM of `rows` x n x k.
    const auto curve_us = [&](double rows, double n, double k) {
        const double shape = rows / (rows + curve.half_m) * (n / (n + curve.half_n)) * (k / (k + curve.half_k));
        return 2.0 * rows * n * k / (peak * 1e6 * curve.max_efficiency * shape);
    };
    // Each misaligned family's rate against the curve's: the geometric mean of
    // modelled-aligned over measured time (at most 1; 1 without points).
    for (int family : {1, 2}) {
        const auto& of = by_family[static_cast<std::size_t>(family)];
        if (of.empty()) continue;
        double log_sum = 0;
        for (const auto& s : of) log_sum += std::log(curve_us(s.m, s.n, s.k) / s.time_us);
        const double ratio = std::min(1.0, std::exp(log_sum / static_cast<double>(of.size())));
        (family == 1 ? curve.align4_ratio : curve.align2_ratio) = ratio;
    }
    // Each transposed layout's rate against NN's: the geometric mean over its
    // points of NN's time at the same shape over the layout's. NN's time is the
    // measured one where the shape was measured NN too (the probes are), else
    // the fitted curve's.
    for (const GemmLayout layout : {GemmLayout::nt, GemmLayout::tn}) {
        double log_sum = 0;
        int count = 0;
        for (const calib::GemmPoint* p : transposed) {
            if (p->layout != layout) continue;
            double nn_us = 0;
            for (const auto& q : points)
                if (q.layout == GemmLayout::nn && q.dtype == p->dtype && q.m == p->m && q.n == p->n && q.k == p->k &&
                    q.batch == p->batch)
                    nn_us = q.time_us;
            if (!(nn_us > 0)) {
                const int family = alignment_classes ? gemm_alignment_class(gemm_alignment(p->n, p->k), dtype) : 0;
                nn_us = curve_us(static_cast<double>(p->m) * static_cast<double>(p->batch), static_cast<double>(p->n),
                                 static_cast<double>(p->k)) /
                        curve.alignment_ratio(family);
            }
            log_sum += std::log(nn_us / p->time_us);
            ++count;
        }
        if (count > 0) (layout == GemmLayout::nt ? curve.nt_ratio : curve.tn_ratio) = std::exp(log_sum / count);
    }
    return curve;
}

}  // namespace dtsim::profiler
