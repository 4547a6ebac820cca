// How fast compute runs while something else runs beside it, for the overlap
// benchmarks (collectives/overlap.cpp, cpu/host_overlap.cpp): a loop of small
// GEMMs on a thread at the executor's compute priority (thread_priority.hpp)
// or, for gloo, at torch's (the normal one).
// Private to profiler/.
#pragma once

#include "dtsim/profiler/measure.hpp"
#include "dtsim/runtime/huge_pages.hpp"
#include "one_blas_thread.hpp"

#include <functional>

namespace dtsim::profiler {

class ComputeProbe {
public:
    // Times one GEMM alone (on the calling thread, one BLAS thread).
    // `lowered`: the probe's thread runs at the executor's compute priority
    // (thread_priority.hpp); false: at the normal priority, as torch's own
    // compute thread runs beside gloo's threads.
    explicit ComputeProbe(const RepeatPolicy& policy, bool lowered = true);

    // Times the GEMM alone again, for a benchmark that alternates rounds
    // alone and beside other work: each round's slowdown is then a ratio
    // of two figures taken close together, not across the machine's drift.
    void retime(const RepeatPolicy& policy);

    // Runs `foreground` on this thread while the probe's thread loops GEMMs;
    // returns how much slower compute ran meanwhile: the window over the GEMM
    // work done inside it, each GEMM worth its time alone, at most
    // kMaxSlowdown (compute that all but stopped).
    double slowdown_during(const std::function<void()>& foreground);

    static constexpr double kMaxSlowdown = 100;

private:
    double gemm_us();           // one 256^3 GEMM, its time
    OneBlasThread one_thread_;  // before the buffers: the probe's GEMMs use one thread
    runtime::Floats a_, b_, c_;
    double alone_us_ = 0;
    bool lowered_ = true;
};

// The mean of `value` over the ranks of MPI_COMM_WORLD (same on every rank).
double mean_over_ranks(double value);

}  // namespace dtsim::profiler
