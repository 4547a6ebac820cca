// Communication before compute on a CPU rank. A rank's compute thread and its
// communication threads share one core, and an MPI collective only advances
// while every rank's communication thread runs: when the scheduler gives the
// core to compute instead, the peers spin and the collective stretches by
// whole time slices. The compute thread therefore runs at the lowest priority,
// so a collective gets the core as soon as it starts (as NCCL kernels take
// their SMs) and compute pauses meanwhile; the overlap calibration measures
// compute under communication with the same priorities, so the simulator's
// slowdown factor describes exactly this.
#pragma once

namespace dtsim::runtime {

// Lowers the calling thread's priority to the lowest (nice 19; Linux nice
// values are per thread). Irreversible without privileges: call it on a
// thread made for compute, never on the main thread. Returns false when the
// system refused (the run then goes on at the normal priority).
bool lower_this_thread_priority();

}  // namespace dtsim::runtime
