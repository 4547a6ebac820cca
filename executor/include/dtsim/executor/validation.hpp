// Predicted against measured: the same Plan priced by the simulator and run by
// the executor, compared in total and per task kind.
#pragma once

#include "dtsim/executor/bracketed_refresh.hpp"
#include "dtsim/executor/execute.hpp"
#include "dtsim/profiler/calibrate_cpu.hpp"
#include "dtsim/sim/simulate.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dtsim::executor {

inline constexpr std::array<sim::TaskKind, 5> kTaskKinds = {sim::TaskKind::compute, sim::TaskKind::collective,
                                                            sim::TaskKind::copy, sim::TaskKind::host_compute,
                                                            sim::TaskKind::io};

// One task of the plan: the simulator's scheduled duration against the
// measured rank's median over the steps after warm-up.
struct TaskComparison {
    int task = 0;      // index into the plan
    std::string name;  // sim::task_name: "forward fc1", "allreduce bucket 0"
    sim::TaskKind kind = sim::TaskKind::compute;
    double predicted_s = 0, measured_s = 0;
};

struct Comparison {
    double predicted_s = 0;  // the simulator's step time
    double measured_s = 0;   // the executor's median step time after warm-up
    // The measured rank the per-kind times come from: the one that spent the
    // longest in compute (the others' collectives include waiting for it).
    int rank = 0;
    // Summed task times of `rank` (the simulator's representative rank) by
    // kind, in kTaskKinds order; measured per task as the median over steps.
    std::array<double, kTaskKinds.size()> predicted_kind_s{}, measured_kind_s{};
    // Peak device memory per rank: the simulator's, and the Plan's allocations
    // at their measured times (ExecResult::peak_memory_bytes).
    std::int64_t predicted_peak_bytes = 0, measured_peak_bytes = 0;
    // Every task of the plan, in plan order (the per-kind sums are theirs).
    std::vector<TaskComparison> tasks;

    // (predicted - measured) / measured.
    double error() const { return measured_s > 0 ? (predicted_s - measured_s) / measured_s : 0; }
    // The same for the summed times of one kind of task (0 when none ran).
    double kind_error(sim::TaskKind kind) const {
        const auto k =
            static_cast<std::size_t>(std::find(kTaskKinds.begin(), kTaskKinds.end(), kind) - kTaskKinds.begin());
        return k < kTaskKinds.size() && measured_kind_s[k] > 0
                   ? (predicted_kind_s[k] - measured_kind_s[k]) / measured_kind_s[k]
                   : 0;
    }
};

// The `n` tasks furthest from their measured time (|predicted - measured|),
// furthest first; ties in plan order.
std::vector<TaskComparison> furthest_tasks(const Comparison& c, std::size_t n);

// `measured` must come from executing `predicted.plan` (on rank 0, which holds every rank's timings).
Comparison compare(const sim::SimResult& predicted, const ExecResult& measured);

// The run against the mean of two prices of its Plan: from the calibration
// refreshed just before the run and just after it. A shared machine's speed
// moves by 10-20 % within seconds; the pair brackets the run, so that its
// drift cancels to first order (with one refresh, before, the noise of the
// GEMM prices against the run's was 15 %; bracketed, 10 %).
Comparison compare_bracketed(const sim::SimResult& before, const sim::SimResult& after, const ExecResult& measured);

// One configuration to validate: its workload, and the GEMM shapes and
// collective sizes its Plan runs (what a calibration and a refresh measure).
struct ValidationCase {
    sim::Config config;
    std::shared_ptr<const models::Workload> workload;
    profiler::CalibrationTargets targets;
};

// The cases of `configs`, in order; `all`, when given, gathers every case's targets.
std::vector<ValidationCase> validation_cases(const std::vector<sim::Config>& configs,
                                             profiler::CalibrationTargets* all = nullptr);

struct ValidationRun {
    sim::SimResult predicted;                       // priced before the run
    std::optional<sim::SimResult> predicted_after;  // priced after it, with a bracket
    ExecResult measured;
    Comparison comparison;  // rank 0 only, which holds every rank's timings
};

// The one validation loop of `dtsim validate` and bench/accuracy: prices the
// case's Plan from `cal` (or, with a bracket, from the calibration refreshed
// for it just before), executes that Plan in replay mode with `options`, prices
// it again from the calibration refreshed just after (bracket), and compares
// (compare_bracketed with a bracket, compare without). Collective over
// MPI_COMM_WORLD.
ValidationRun validate_case(const ValidationCase& c, const calib::Calibration& cal, BracketedRefresh* bracket,
                            ExecOptions options);

}  // namespace dtsim::executor
