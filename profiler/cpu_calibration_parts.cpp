#include "cpu_calibration_parts.hpp"

#include "cpu/compute_probe.hpp"
#include "cpu/one_blas_thread.hpp"
#include "dtsim/profiler/calibrate_cpu.hpp"
#include "dtsim/profiler/cpu_benchmarks.hpp"
#include "dtsim/runtime/cpu_kernels.hpp"
#include "dtsim/runtime/peer_wait.hpp"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace dtsim::profiler {

RepeatPolicy machine_policy(bool quick) {
    RepeatPolicy p = repeat_policy(quick);
    p.min_sample_us = quick ? 30e3 : 100e3;
    return p;
}

namespace {

// The first-touch benchmark's mapping: 64 MiB, busy or alone.
constexpr std::int64_t kFirstTouchBytes = 64LL << 20;

// The ranks of MPI_COMM_WORLD on this rank's host (collective; the caller frees it).
MPI_Comm split_by_node() {
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    return node;
}

}  // namespace

bool ranks_share_cores() {
    // Computed once: the first call is at the same point on every rank.
    static const bool shared = [] {
        MPI_Comm node = split_by_node();
        int ranks = 1;
        MPI_Comm_size(node, &ranks);
        // mpirun may bind each rank to one core: count the cores of all of them.
        cpu_set_t mine, all;
        CPU_ZERO(&mine);
        CPU_ZERO(&all);
        if (sched_getaffinity(0, sizeof mine, &mine) != 0) CPU_SET(0, &mine);
        MPI_Allreduce(&mine, &all, static_cast<int>(sizeof mine), MPI_BYTE, MPI_BOR, node);
        MPI_Comm_free(&node);
        int local = ranks > CPU_COUNT(&all) ? 1 : 0, any = 0;
        MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        return any != 0;
    }();
    return shared;
}

double pace_rate(double local, bool shared) {
    int ranks = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    double out = 0;
    if (shared) {
        MPI_Allreduce(&local, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        return out / ranks;
    }
    MPI_Allreduce(&local, &out, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    return out;
}

double pace_time(double local, bool shared) {
    if (shared) return 1.0 / pace_rate(1.0 / std::max(local, 1e-9), true);  // a time too short to see: 1 fs
    double out = 0;
    MPI_Allreduce(&local, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return out;
}

void measure_memory_and_adam(calib::Calibration& c, const RepeatPolicy& policy, const ProgressFn& progress) {
    MemoryResult mem = bench_memory(policy, progress);
    const double memcpy_gbps = pace_rate(mem.memcpy_gbps);
    const double adam = pace_rate(bench_cpu_adam_params_per_s(16 << 20, policy));
    c.device.mem_bw_gbps = pace_rate(mem.stream_gbps);
    c.device.elementwise_efficiency = 1.0;  // the measured bandwidth is what a streaming pass gets
    c.device.in_place_speedup = mean_over_ranks(mem.in_place_speedup);
    c.device.kernel_overhead_us = pace_time(mem.kernel_overhead_us);
    // "Device" and host are the same memory on the CPU backend: copies run at memcpy speed.
    c.host.h2d_pinned_gbps = c.host.d2h_pinned_gbps = c.host.h2d_pageable_gbps = c.host.d2h_pageable_gbps = memcpy_gbps;
    c.host.cpu_adam_params_per_s = c.host.cpu_torch_adam_params_per_s = adam;
    c.host.first_touch_gbps = pace_rate(bench_first_touch_gbps(kFirstTouchBytes, policy));
    measure_one_rank_memory(c, policy);
}

void measure_one_rank_memory(calib::Calibration& c, const RepeatPolicy& policy) {
    MPI_Comm node = split_by_node();
    int node_ranks = 1, rank = 0;
    MPI_Comm_size(node, &node_ranks);
    MPI_Comm_free(&node);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int any_shared = node_ranks > 1 ? 1 : 0, shared = 0;
    MPI_Allreduce(&any_shared, &shared, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (shared == 0) return;  // one rank a node: the figures above are one rank's alone
    // This machine's memory bandwidth drifts by a third within minutes, more
    // than the ranks' sharing costs, so the two are compared in alternation:
    // each round all ranks take a sample at once (the slowest rank's counts,
    // as pace_rate takes it), then rank 0 one alone while the others sleep
    // (an MPI barrier would spin on a core). The figures are the calibration's
    // busy ones times the median ratio; one rank alone is never slower than
    // with its node busy (a ratio below 1 is the drift), so at least them.
    const RepeatPolicy one = single_sample(policy);
    constexpr int kRounds = 7;
    runtime::prepare_peer_wait(MPI_COMM_WORLD);
    std::vector<double> bw_ratio, touch_ratio;
    for (int round = 0; round < kRounds; ++round) {
        runtime::wait_for_peers(MPI_COMM_WORLD);
        double busy[2] = {bench_stream_gbps(one), 0};
        runtime::wait_for_peers(MPI_COMM_WORLD);
        busy[1] = bench_first_touch_gbps(kFirstTouchBytes, one);
        MPI_Allreduce(MPI_IN_PLACE, busy, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
        if (rank == 0) {
            bw_ratio.push_back(bench_stream_gbps(one) / busy[0]);
            touch_ratio.push_back(bench_first_touch_gbps(kFirstTouchBytes, one) / busy[1]);
        }
    }
    const auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    double ratio[2] = {0, 0};
    if (rank == 0) {
        ratio[0] = median(bw_ratio);
        ratio[1] = median(touch_ratio);
    }
    runtime::wait_for_peers(MPI_COMM_WORLD);
    MPI_Bcast(ratio, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    c.host.mem_bw_one_rank_gbps = c.device.mem_bw_gbps * std::max(1.0, ratio[0]);
    c.host.first_touch_one_rank_gbps = c.host.first_touch_gbps * std::max(1.0, ratio[1]);
}

void measure_stragglers(calib::Calibration& c, bool quick) {
    int ranks = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks < 2) return;
    // One layer of an MLP at batch 64: about 55 ms a window here (quick: 14 ms).
    const std::int64_t batch = 64, width = quick ? 1024 : 2048;
    const int rounds = quick ? 8 : 40;
    const OneBlasThread one_thread;
    runtime::Floats x(static_cast<std::size_t>(batch * width), 0.25f), w(static_cast<std::size_t>(width * width), 0.5f),
        y(x.size(), 0.0f), g(w.size(), 0.0f);
    const auto window = [&] {
        for (int twice = 0; twice < 2; ++twice) {
            runtime::sgemm(GemmLayout::nt, batch, width, width, x.data(), w.data(), y.data());  // forward
            runtime::sgemm(GemmLayout::nn, batch, width, width, y.data(), w.data(), x.data());  // input gradient
            runtime::sgemm(GemmLayout::tn, width, width, batch, y.data(), x.data(), g.data());  // weight gradient
        }
    };
    runtime::prepare_peer_wait(MPI_COMM_WORLD);
    window();  // warm: pages and caches
    double slowest = 0, mean = 0;
    for (int round = 0; round < rounds; ++round) {
        runtime::wait_for_peers(MPI_COMM_WORLD);
        const auto start = std::chrono::steady_clock::now();
        window();
        const double t = elapsed_us(start);
        double max_t = 0, sum_t = 0;
        MPI_Allreduce(&t, &max_t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(&t, &sum_t, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        slowest += max_t;
        mean += sum_t / ranks;
    }
    c.overlap.straggler = std::max(1.0, slowest / mean);
    c.overlap.straggler_ranks = ranks;
}

}  // namespace dtsim::profiler
