// Interference with compute: allreduces (or host memory passes) on the
// calling thread while a second thread, at the executor's compute priority,
// loops cblas_sgemm; each compared with its rate alone.
#include "collective_table.hpp"
#include "dtsim/profiler/collective_benchmarks.hpp"
#include "dtsim/profiler/cpu_kernels.hpp"
#include "dtsim/profiler/huge_pages.hpp"
#include "dtsim/profiler/thread_priority.hpp"

#include <cblas.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

namespace dtsim::profiler {
namespace {

// Compute that all but stops under communication is recorded as this slow.
constexpr double kMaxSlowdown = 100;

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Gemm {
    int n;
    Floats a, b, c;
    explicit Gemm(int size)
        : n(size),
          a(static_cast<std::size_t>(size) * static_cast<std::size_t>(size), 1.0f),
          b(a.size(), 0.5f),
          c(a.size(), 0.0f) {}
    // One GEMM; returns its time in microseconds.
    double run() {
        const auto t0 = std::chrono::steady_clock::now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(),
                    n);
        return seconds_since(t0) * 1e6;
    }
};

struct CommBuffers {
    Floats send, recv;
    explicit CommBuffers(std::size_t count) : send(count, 1.0f), recv(count, 0.0f) {}
};

// `iters` back-to-back allreduces (out of place, so values never grow); the
// local time of each in microseconds.
std::vector<double> allreduce_loop(CommBuffers& buf, int iters) {
    std::vector<double> times;
    times.reserve(static_cast<std::size_t>(iters));
    const int count = collectives::mpi_count(static_cast<std::int64_t>(buf.send.size()));
    for (int i = 0; i < iters; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        MPI_Allreduce(buf.send.data(), buf.recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        times.push_back(seconds_since(t0) * 1e6);
    }
    return times;
}

// The median over iterations of the slowest rank's time (same on every rank).
double slowest_median_us(std::vector<double> local) {
    std::vector<double> slowest(local.size());
    MPI_Allreduce(local.data(), slowest.data(), static_cast<int>(local.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return summarize(std::move(slowest)).median_us;
}

// Runs `foreground` on this thread while a thread at the executor's compute
// priority (thread_priority.hpp) loops `gemm`; returns how much slower compute
// ran meanwhile: the window over the GEMM work done inside it, each GEMM worth
// its time alone. With the foreground first, it can be close to stopped.
double compute_slowdown_during(Gemm& gemm, double compute_alone_us, const std::function<void()>& foreground) {
    std::atomic<bool> done{false};
    std::vector<double> compute_times;
    std::thread compute([&] {
        lower_this_thread_priority();
        while (!done.load(std::memory_order_acquire)) compute_times.push_back(gemm.run());
    });
    const auto window_start = std::chrono::steady_clock::now();
    foreground();
    const double window_us = seconds_since(window_start) * 1e6;
    done.store(true, std::memory_order_release);
    compute.join();
    // The GEMM still running when the window closed counts for the part of it inside.
    double work_us = 0;
    double elapsed_us = 0;
    for (double t : compute_times) {
        const double inside = std::min(t, window_us - elapsed_us);
        if (inside <= 0) break;
        work_us += compute_alone_us * inside / t;
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

}  // namespace

calib::OverlapSpec bench_overlap(bool quick, const RepeatPolicy& policy) {
    // A second thread calling MPI needs MPI_THREAD_MULTIPLE; every rank must agree.
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    int local_ok = provided == MPI_THREAD_MULTIPLE ? 1 : 0;
    int all_ok = 0;
    MPI_Allreduce(&local_ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all_ok == 0) return {};

    openblas_set_num_threads(1);
    // Small GEMMs, so that the compute done inside the window is counted
    // finely; collectives large enough that the scheduler, not their
    // boundaries, decides compute's share. A quick run has fewer of them only:
    // with smaller sizes its figures came out 3-10x off a full run's.
    Gemm gemm(256);
    CommBuffers buf(static_cast<std::size_t>(8 << 20) / sizeof(float));
    const int comm_iters =
        std::clamp(quick ? 10 : 20, std::max(1, policy.min_samples), std::max(1, policy.max_samples));

    // Compute alone (local to each rank).
    const double compute_alone_us = measure(policy, [&] { return gemm.run(); }).median_us;

    // Communication alone.
    allreduce_loop(buf, std::max(1, policy.warmup));
    MPI_Barrier(MPI_COMM_WORLD);
    const double comm_alone_us = slowest_median_us(allreduce_loop(buf, comm_iters));

    // Both at once.
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<double> comm_local;
    const double compute_slowdown =
        compute_slowdown_during(gemm, compute_alone_us, [&] { comm_local = allreduce_loop(buf, comm_iters); });
    const double comm_together_us = slowest_median_us(std::move(comm_local));

    calib::OverlapSpec spec;
    spec.compute_slowdown_under_comm = std::max(1.0, mean_over_ranks(compute_slowdown));
    spec.comm_slowdown_under_compute = std::max(1.0, comm_alone_us > 0 ? comm_together_us / comm_alone_us : 1.0);
    return spec;
}

void bench_host_overlap(bool quick, const RepeatPolicy& policy, calib::OverlapSpec& spec) {
    openblas_set_num_threads(1);
    Gemm gemm(256);
    const double compute_alone_us = measure(policy, [&] { return gemm.run(); }).median_us;
    // Host work as the executor's copy and CPU-optimizer threads do it: memory
    // passes at the normal priority.
    Floats scratch(static_cast<std::size_t>(kMemoryPassScratchBytes) / sizeof(float), 1.0f);
    const std::int64_t pass_bytes = 32LL << 20;
    auto pass = [&] {
        const auto t0 = std::chrono::steady_clock::now();
        memory_pass(pass_bytes, scratch);
        return seconds_since(t0) * 1e6;
    };
    const double host_alone_us = measure(policy, pass).median_us;
    const int iters = std::clamp(quick ? 10 : 20, std::max(1, policy.min_samples), std::max(1, policy.max_samples));
    std::vector<double> host_times;
    const double compute_slowdown = compute_slowdown_during(gemm, compute_alone_us, [&] {
        for (int i = 0; i < iters; ++i) host_times.push_back(pass());
    });
    const double host_together_us = summarize(std::move(host_times)).median_us;
    spec.compute_slowdown_under_host = std::max(1.0, mean_over_ranks(compute_slowdown));
    spec.host_slowdown_under_compute =
        std::max(1.0, mean_over_ranks(host_alone_us > 0 ? host_together_us / host_alone_us : 1.0));
}

}  // namespace dtsim::profiler
