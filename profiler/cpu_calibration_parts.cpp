#include "cpu_calibration_parts.hpp"

#include "dtsim/profiler/calibrate_cpu.hpp"
#include "dtsim/profiler/cpu_benchmarks.hpp"

#include <mpi.h>

namespace dtsim::profiler {

RepeatPolicy machine_policy(bool quick) {
    RepeatPolicy p = repeat_policy(quick);
    p.min_sample_us = quick ? 30e3 : 100e3;
    return p;
}

double slowest_time(double local) {
    double out = 0;
    MPI_Allreduce(&local, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return out;
}
double slowest_rate(double local) {
    double out = 0;
    MPI_Allreduce(&local, &out, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    return out;
}

void measure_memory_and_adam(calib::Calibration& c, const RepeatPolicy& policy, const ProgressFn& progress) {
    MemoryResult mem = bench_memory(policy, progress);
    const double memcpy_gbps = slowest_rate(mem.memcpy_gbps);
    const double adam = slowest_rate(bench_cpu_adam_params_per_s(16 << 20, policy));
    c.device.mem_bw_gbps = slowest_rate(mem.stream_gbps);
    c.device.elementwise_efficiency = 1.0;  // the measured bandwidth is what a streaming pass gets
    c.device.kernel_overhead_us = slowest_time(mem.kernel_overhead_us);
    // "Device" and host are the same memory on the CPU backend: copies run at memcpy speed.
    c.host.h2d_pinned_gbps = c.host.d2h_pinned_gbps = c.host.h2d_pageable_gbps = c.host.d2h_pageable_gbps = memcpy_gbps;
    c.host.cpu_adam_params_per_s = c.host.cpu_torch_adam_params_per_s = adam;
}

}  // namespace dtsim::profiler
