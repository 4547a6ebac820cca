#include "compute_probe.hpp"

#include "dtsim/runtime/thread_priority.hpp"

#include <cblas.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace dtsim::profiler {
namespace {

// Small GEMMs, so that the compute done inside a window is counted finely.
constexpr int kGemmSize = 256;

}  // namespace

ComputeProbe::ComputeProbe(const RepeatPolicy& policy, bool lowered)
    : a_(static_cast<std::size_t>(kGemmSize) * kGemmSize, 1.0f),
      b_(a_.size(), 0.5f),
      c_(a_.size(), 0.0f),
      lowered_(lowered) {
    retime(policy);
}

void ComputeProbe::retime(const RepeatPolicy& policy) {
    alone_us_ = measure(policy, [&] { return gemm_us(); }).mean_us;  // the mean, as the GEMM points
}

double ComputeProbe::gemm_us() {
    const auto t0 = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kGemmSize, kGemmSize, kGemmSize, 1.0f, a_.data(), kGemmSize,
                b_.data(), kGemmSize, 0.0f, c_.data(), kGemmSize);
    return elapsed_us(t0);
}

double ComputeProbe::slowdown_during(const std::function<void()>& foreground) {
    std::atomic<bool> done{false};
    std::vector<double> times;
    std::thread compute([&] {
        if (lowered_) runtime::lower_this_thread_priority();
        while (!done.load(std::memory_order_acquire)) times.push_back(gemm_us());
    });
    const auto window_start = std::chrono::steady_clock::now();
    foreground();
    const double window_us = elapsed_us(window_start);
    done.store(true, std::memory_order_release);
    compute.join();
    // The GEMM still running when the window closed counts for the part of it inside.
    double work_us = 0;
    double elapsed_us = 0;
    for (double t : times) {
        const double inside = std::min(t, window_us - elapsed_us);
        if (inside <= 0) break;
        work_us += alone_us_ * inside / t;
        elapsed_us += t;
    }
    return work_us > 0 ? std::min(kMaxSlowdown, window_us / work_us) : kMaxSlowdown;
}

double mean_over_ranks(double value) {
    int nranks = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    double sum = 0;
    MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / nranks;
}

}  // namespace dtsim::profiler
