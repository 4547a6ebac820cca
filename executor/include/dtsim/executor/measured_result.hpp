// Turning per-task timings into an ExecResult, shared by the CPU and CUDA
// backends: timings gathered on rank 0, step times, the median after
// warm-up, peak memory and the measured timeline.
#pragma once

#include "dtsim/executor/execute.hpp"

#include <vector>

namespace dtsim::executor {

// Every rank's timings of one step on rank 0 (collective on MPI_COMM_WORLD);
// elsewhere this rank's row alone.
std::vector<std::vector<TaskTiming>> gather_on_rank0(const std::vector<TaskTiming>& mine, int rank, int world);

// Per step: the latest task end over the ranks in r.timings.
void fill_step_times(ExecResult& r);

double median(std::vector<double> v);  // 0 for none

// A process per rank, the plan's streams as threads, every step laid end to
// end (arg "step"); the title names r.backend.
sim::Timeline make_measured_timeline(const ExecResult& r, const sim::Plan& plan, const models::Workload& w,
                                     const sim::Config& config);

// The first step after warm-up: r.warmup_steps, leaving at least one step.
std::size_t first_measured_step(const ExecResult& r);

// Collective: from r.timings, r.rank and r.warmup_steps, fills the step times
// (the same on every rank), their median after warm-up, the peak memory and peak
// RSS, and on rank 0 the measured timeline.
void finish_measured_result(ExecResult& r, const sim::Plan& plan, const models::Workload& w, const sim::Config& config);

}  // namespace dtsim::executor
