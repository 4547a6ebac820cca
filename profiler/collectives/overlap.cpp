// Interference of communication with compute: allreduces on the calling
// thread while a probe thread at the run's compute priority loops GEMMs
// (cpu/compute_probe.hpp); each compared with its rate alone.
#include "../cpu/compute_probe.hpp"
#include "collective_table.hpp"
#include "dtsim/profiler/collective_benchmarks.hpp"
#include "dtsim/runtime/huge_pages.hpp"
#include "dtsim/runtime/peer_wait.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace dtsim::profiler {
namespace {

// `iters` back-to-back in-place allreduces, as DDP's buckets run (of zeros,
// so values never grow); the local time of each in microseconds.
std::vector<double> allreduce_loop(runtime::Floats& buf, runtime::Communicator& comm, int iters) {
    std::vector<double> times;
    times.reserve(static_cast<std::size_t>(iters));
    for (int i = 0; i < iters; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        runtime::wait_for_peers(MPI_COMM_WORLD);  // as the executor enters every collective (peer_wait.hpp)
        comm.allreduce_sum(buf.data(), static_cast<std::int64_t>(buf.size()));
        times.push_back(elapsed_us(t0));
    }
    return times;
}

// The median over iterations of the slowest rank's time (same on every rank).
// Medians here, where every other figure of a calibration is a mean
// (measure.hpp): these times only form the contention factors, ratios of a
// loop's time beside the other kind of work to its time alone. The stalls a
// mean takes in (preemptions, page faults) strike both loops alike and are
// priced already, at their rate, in each task's standalone mean; a ratio of
// means would count them again, and with few, long iterations one stall
// moves a mean by more than the effect measured.
double slowest_median_us(std::vector<double> local) {
    std::vector<double> slowest(local.size());
    MPI_Allreduce(local.data(), slowest.data(), static_cast<int>(local.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return summarize(std::move(slowest)).median_us;
}

}  // namespace

calib::OverlapSpec bench_overlap(bool quick, const RepeatPolicy& policy, runtime::Communicator& comm) {
    // Collectives large enough that the scheduler, not their boundaries,
    // decides compute's share. A quick run has fewer of them only: with smaller
    // sizes its figures came out 3-10x off a full run's.
    runtime::prepare_peer_wait(MPI_COMM_WORLD);  // its one-time set-up, out of the timings
    // Compute at the priority the run gives it: the executor lowers its
    // compute thread; torch (whose CPU transport gloo is) does not.
    ComputeProbe probe(policy, comm.backend() != runtime::CommBackend::gloo);
    runtime::Floats buf(static_cast<std::size_t>(8 << 20) / sizeof(float), 0.0f);
    const int comm_iters = std::clamp(quick ? 6 : 10, std::max(1, policy.min_samples), std::max(1, policy.max_samples));
    allreduce_loop(buf, comm, std::max(1, policy.warmup));

    // Rounds of each kind of work alone, then both at once; each factor is the
    // median over rounds of one round's ratio. One pair of phases, as before,
    // read anywhere from 1.3 to 1.9 for compute's slowdown on this 2-core VM
    // between calibrations minutes apart, and a torch probe of the same ratio
    // swung 1.28-1.86 from one round to the next (bench/results/torch_xcheck.md,
    // stop 36): the machine drifts between phases that lie seconds apart.
    const int rounds = quick ? 3 : 5;
    std::vector<double> compute_slowdowns, comm_slowdowns;
    for (int r = 0; r < rounds; ++r) {
        comm.barrier();
        const double comm_alone_us = slowest_median_us(allreduce_loop(buf, comm, comm_iters));
        if (r > 0) probe.retime(policy);  // the constructor timed the first round's
        comm.barrier();
        std::vector<double> comm_local;
        const double compute_slowdown =
            probe.slowdown_during([&] { comm_local = allreduce_loop(buf, comm, comm_iters); });
        const double comm_together_us = slowest_median_us(std::move(comm_local));
        compute_slowdowns.push_back(mean_over_ranks(compute_slowdown));
        comm_slowdowns.push_back(comm_alone_us > 0 ? comm_together_us / comm_alone_us : 1.0);
    }

    calib::OverlapSpec spec;
    spec.compute_slowdown_under_comm = std::max(1.0, summarize(std::move(compute_slowdowns)).median_us);
    spec.comm_slowdown_under_compute = std::max(1.0, summarize(std::move(comm_slowdowns)).median_us);
    return spec;
}

}  // namespace dtsim::profiler
