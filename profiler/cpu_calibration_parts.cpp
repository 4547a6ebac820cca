#include "cpu_calibration_parts.hpp"

#include "dtsim/profiler/calibrate_cpu.hpp"
#include "dtsim/profiler/cpu_benchmarks.hpp"

#include <mpi.h>
#include <sched.h>

#include <algorithm>

namespace dtsim::profiler {

RepeatPolicy machine_policy(bool quick) {
    RepeatPolicy p = repeat_policy(quick);
    p.min_sample_us = quick ? 30e3 : 100e3;
    return p;
}

bool ranks_share_cores() {
    // Computed once: the first call is at the same point on every rank.
    static const bool shared = [] {
        MPI_Comm node = MPI_COMM_NULL;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
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
    c.device.kernel_overhead_us = pace_time(mem.kernel_overhead_us);
    // "Device" and host are the same memory on the CPU backend: copies run at memcpy speed.
    c.host.h2d_pinned_gbps = c.host.d2h_pinned_gbps = c.host.h2d_pageable_gbps = c.host.d2h_pageable_gbps = memcpy_gbps;
    c.host.cpu_adam_params_per_s = c.host.cpu_torch_adam_params_per_s = adam;
    c.host.first_touch_gbps = pace_rate(bench_first_touch_gbps(64LL << 20, policy));
}

}  // namespace dtsim::profiler
