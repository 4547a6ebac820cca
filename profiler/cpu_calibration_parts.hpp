// Pieces the CPU calibration and its refresh share (private to profiler/):
// the repeat policy of this machine, the slowest rank's figure, and the
// memory-bound benchmarks. Collective over MPI_COMM_WORLD.
#pragma once

#include "dtsim/profiler/calibration.hpp"
#include "dtsim/profiler/measure.hpp"

namespace dtsim::profiler {

// repeat_policy(quick) with long samples (RepeatPolicy::min_sample_us: 30 ms
// quick, 100 ms full), so that a sample takes in this machine's stalls at
// their rate and, where ranks share cores, many turns of the scheduler.
RepeatPolicy machine_policy(bool quick);

// A data-parallel step runs at the pace of its slowest rank (every rank waits
// at the next collective), and cores are not equal (siblings, neighbours): the
// calibration keeps the slowest rank's figure, like the collectives' time
// columns. It is then also the same on every rank.
double slowest_time(double local);
double slowest_rate(double local);

// Streaming and copy bandwidth, the cost of a tiny pass and CPU Adam into `c`:
// the memory-bound figures, which all ranks of a host share.
void measure_memory_and_adam(calib::Calibration& c, const RepeatPolicy& policy, const ProgressFn& progress);

}  // namespace dtsim::profiler
