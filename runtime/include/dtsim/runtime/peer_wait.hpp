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

#include <atomic>

namespace dtsim::runtime {

// Returns true once every rank of `comm` has called it, asleep meanwhile.
// Where the ranks share a host, they meet at a counter in shared memory and
// the last to arrive wakes the others (a futex): a late rank costs its peers
// one wake-up, as in the calibration's collectives. Elsewhere it polls a
// nonblocking barrier with sleeps backing off to 200 us, so a late arrival
// pays up to log2(ranks) poll intervals. At most one thread of a rank may
// wait on a communicator at a time (two would count as two ranks).
//
// Returns false once `*stop` is set (looked at every 50 ms): a rank whose own
// run failed must not sleep on peers that wait for it. It has counted itself,
// so peers that arrive later go on into the collective and wait there (the
// failing run aborts them); the communicator's barrier is then unusable. Sets the calling thread's timer
// slack to 1 ns (threads it creates later inherit it). Collective over `comm`.
bool wait_for_peers(MPI_Comm comm, const std::atomic<bool>* stop = nullptr);

// Sets up `comm`'s barrier (a communicator split, a shared page, agreement
// over `comm`), which wait_for_peers otherwise does at its first call: call it
// where that cost must stay out of a timing, and from one thread, in the same
// order on every rank, before threads wait on several communicators.
// Collective over `comm`; a no-op the second time.
void prepare_peer_wait(MPI_Comm comm);

}  // namespace dtsim::runtime
