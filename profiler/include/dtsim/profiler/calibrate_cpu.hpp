// The CPU backend's whole calibration (OpenBLAS, memory, files, CPU Adam, MPI
// collectives, overlap), fitted into a Calibration. Used by `dtsim calibrate`
// and by `dtsim validate` when no calibration is given.
#pragma once

#include "dtsim/profiler/calibration.hpp"
#include "dtsim/profiler/cpu_benchmarks.hpp"
#include "dtsim/profiler/measure.hpp"
#include "dtsim/runtime/communicator.hpp"

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::profiler {

// What the plans to be priced run, measured exactly besides the sweeps.
struct CalibrationTargets {
    std::vector<GemmShape> gemm_shapes;  // a model's own shapes
    // Collective sizes (bytes S) the plans issue (see CollectiveSweep::extra_sizes).
    std::vector<std::pair<calib::CollectiveKind, std::int64_t>> collective_sizes;
};

struct CpuCalibrationOptions {
    bool quick = false;  // a small sweep (tests, validate)
    CalibrationTargets targets;
    std::string io_dir = ".";  // where the file benchmark writes
    std::string name;          // default: <host>-cpu-<N>ranks (-gloo for gloo)
    // The collectives' transport: MPI, or gloo over TCP as torch runs on CPU.
    runtime::CommBackend transport = runtime::CommBackend::mpi;
    // Over gloo: how fp16 allreduces sum, as the torch to be predicted does (runtime::HalfSum).
    runtime::HalfSum half_sum = runtime::HalfSum::c10;
};

// The provenance backend of a CPU calibration over `transport`:
// "cpu-mpi-openblas" or "cpu-gloo-openblas".
std::string cpu_backend_name(runtime::CommBackend transport);
// The transport a CPU calibration measured (its provenance backend); MPI for
// anything else.
runtime::CommBackend transport_of(const calib::Calibration& c);
// How a gloo calibration's fp16 allreduce summed (its provenance); c10::Half where it does not say.
runtime::HalfSum half_sum_of(const calib::Calibration& c);

// Re-measures, over the transport `base` measured, in a few seconds, what drifts on a shared machine and what a Plan's
// price rests on: `targets`' GEMM shapes and collective sizes (nothing else of
// the sweeps), memory and copy bandwidth, and CPU Adam. Those replace their
// counterparts in `base`; the rest (file I/O, overlap, other points) is kept.
// Collective over MPI_COMM_WORLD, like calibrate_cpu. For checking a
// prediction against a run that follows at once (`dtsim validate`,
// bench/accuracy).
calib::Calibration refresh_cpu_calibration(const calib::Calibration& base, const CalibrationTargets& targets);

// Why `c` cannot be refreshed here ("" when it can): only a CPU calibration
// measured on this machine (as its provenance names it) with `ranks` ranks.
std::string why_not_refreshable(const calib::Calibration& c, int ranks);

// The repeat policy of a quick or a full calibration.
RepeatPolicy repeat_policy(bool quick);

// Collective over MPI_COMM_WORLD (MPI initialised, MPI_THREAD_MULTIPLE for the
// overlap part). `report` receives the nccl-tests tables as they are measured.
calib::Calibration calibrate_cpu(const CpuCalibrationOptions& options, const ProgressFn& progress,
                                 const std::function<void(std::string_view)>& report);

}  // namespace dtsim::profiler
