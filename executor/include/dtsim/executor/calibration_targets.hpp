// What a calibration should measure exactly before it prices some plans: the
// GEMM shapes their workloads run and the collective sizes they issue. A
// measured point needs no interpolation, and on CPUs neither curve is smooth
// (cache sizes; shared-memory MPI protocols switching between powers of two).
#pragma once

#include "dtsim/models/workload.hpp"
#include "dtsim/profiler/calibrate_cpu.hpp"
#include "dtsim/sim/plan.hpp"

#include <vector>

namespace dtsim::executor {

// About a second of one CPU core: the largest GEMM a CPU benchmark runs.
inline constexpr double kCpuMaxGemmFlops = 2e10;

// The GEMM shapes of `w`'s layers, batched GEMMs as rows x batch; shapes of
// more than `max_flops` are left out and counted in `skipped`.
std::vector<profiler::GemmShape> gemm_shapes(const models::Workload& w, int& skipped,
                                             double max_flops = kCpuMaxGemmFlops);

// Adds `w`'s GEMM shapes and `plan`'s collective sizes to `o` (each once).
void add_calibration_targets(profiler::CalibrationTargets& o, const models::Workload& w, const sim::Plan& plan);

// The targets of `a` and of `b` (each once).
profiler::CalibrationTargets joined(profiler::CalibrationTargets a, const profiler::CalibrationTargets& b);

}  // namespace dtsim::executor
