// Pieces the CPU calibration and its refresh share (private to profiler/):
// the repeat policy of this machine, the figure of all ranks that paces a step, and the
// memory-bound benchmarks. Collective over MPI_COMM_WORLD.
#pragma once

#include "dtsim/profiler/calibration.hpp"
#include "dtsim/profiler/measure.hpp"

namespace dtsim::profiler {

// repeat_policy(quick) with long samples (RepeatPolicy::min_sample_us: 30 ms
// quick, 100 ms full), so that a sample takes in this machine's stalls at
// their rate and, where ranks share cores, many turns of the scheduler.
RepeatPolicy machine_policy(bool quick);

// Whether the ranks on some host outnumber the cores they may run on (the
// union of their affinity masks). Collective over MPI_COMM_WORLD, computed at
// the first call, which every rank must make at the same point (calibrate_cpu
// and its refresh do, through pace_time); the same on every rank.
bool ranks_share_cores();

// The figure of all ranks that paces a data-parallel step, the same on every
// rank. Where each rank has cores of its own, the step waits at every
// collective for the slowest rank, and cores are not equal (siblings,
// neighbours): the slowest rank's figure, like the collectives' time columns.
// Where ranks outnumber a host's cores, a rank that waits sleeps
// (peer_wait.hpp) and hands its core to the others, which catch up: the step
// runs at the ranks' combined rate, so the mean rate (harmonic mean time).
// Priced by their slowest rank, 4 ranks on 2 cores came out with 20-60 %
// more compute per step than they ran. `shared`: whether ranks share cores
// (ranks_share_cores()). Collective over MPI_COMM_WORLD.
double pace_time(double local, bool shared);
double pace_rate(double local, bool shared);
inline double pace_time(double local) {
    return pace_time(local, ranks_share_cores());
}
inline double pace_rate(double local) {
    return pace_rate(local, ranks_share_cores());
}

// Streaming and copy bandwidth, the cost of a tiny pass and CPU Adam into `c`:
// the memory-bound figures, which all ranks of a host share.
void measure_memory_and_adam(calib::Calibration& c, const RepeatPolicy& policy, const ProgressFn& progress);
// Memory bandwidth and the first-touch rate of one rank alone, the node's other
// ranks asleep (HostSpec::mem_bw_one_rank_gbps), from c's busy figures and the
// ratio of samples alone to samples taken in alternation with every rank busy:
// where a node runs more than one rank; else leaves them 0. Collective over
// MPI_COMM_WORLD.
void measure_one_rank_memory(calib::Calibration& c, const RepeatPolicy& policy);
// How far apart ranks computing the same work finish it
// (OverlapSpec::straggler): rounds in which every rank, after meeting the
// others asleep, times one window of the same GEMMs (an MLP layer's forward
// and backward, NT, NN and TN); the mean over rounds of the slowest rank's
// window over the mean of the ranks' means. Where more than one rank runs;
// else leaves it 1. Collective over MPI_COMM_WORLD.
void measure_stragglers(calib::Calibration& c, bool quick);

}  // namespace dtsim::profiler
