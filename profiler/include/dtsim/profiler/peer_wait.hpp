// Waiting for the other ranks of a collective without burning a core.
//
// MPI implementations busy-poll: a rank that enters a collective before its
// peers spins on its core until they arrive. On a GPU, a waiting NCCL kernel
// leaves the compute stream running; on the CPU backend, the spinning
// communication thread takes the core from the rank's compute, or, where
// ranks outnumber cores, from a peer's compute, so that every wait lengthens
// the step by more than the wait itself. The CPU backend therefore enters
// each collective through this barrier, which sleeps while it waits, so that
// the MPI call itself starts with every rank present.
#pragma once

#include <mpi.h>

namespace dtsim::profiler {

// Returns once every rank of `comm` has called it; sleeps between polls of a
// nonblocking barrier, backing off to one poll per 200 us. The barrier takes
// log2(ranks) rounds, each advancing when a rank polls, so a late arrival
// pays up to that many poll intervals (measured: about 0.1 ms on 2 ranks,
// 0.4 ms on 4), more than the calibration's collectives, which start in step,
// see. Sets the calling thread's timer slack to 1 ns (threads it creates
// later inherit it). Collective over `comm`.
void wait_for_peers(MPI_Comm comm);

}  // namespace dtsim::profiler
