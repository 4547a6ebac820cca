// Fitting measured points to the Calibration's curves, each with its error.
#pragma once

#include "dtsim/profiler/calibration.hpp"

#include <span>
#include <vector>

namespace dtsim::profiler {

// Least-squares alpha-beta line t = latency + S * busbw_factor(kind, n) / busbw
// over the points, weighted so that small and large sizes count alike
// (relative error); fit_error is the relative RMS error.
calib::CollectiveCurve fit_collective(calib::CollectiveKind kind, calib::LinkScope scope, int group_size,
                                      std::span<const calib::CollectivePoint> points);

// Fits max_efficiency and the half-efficiency dimensions of a GemmCurve with
// the given peak to measured points; fit_error is the relative RMS error of the
// predicted times. peak_tflops <= 0 (CPU): the peak is estimated as the fitted
// curve's large-GEMM rate and max_efficiency is 1. `alignment_classes` (cuBLAS):
// points whose n and k are not 16-byte multiples stay out of the shape fit and
// set align4_ratio and align2_ratio instead; without it (CPU BLAS) every point
// is fitted and the ratios are 1. Points of a transposed layout (NT, TN) stay
// out of the shape fit too and set nt_ratio and tn_ratio against NN's times.
calib::GemmCurve fit_gemm_curve(DType dtype, double peak_tflops, std::span<const calib::GemmPoint> points,
                                bool alignment_classes = false);

}  // namespace dtsim::profiler
