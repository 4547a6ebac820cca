// The CPU calibration: every benchmark of the CPU backend, fitted into a
// Calibration. Every rank of MPI_COMM_WORLD measures at once, as ranks share
// the machine in training; the result is the same on every rank.
#include "dtsim/profiler/calibrate_cpu.hpp"

#include "dtsim/profiler/collective_benchmarks.hpp"
#include "dtsim/profiler/fit.hpp"
#include "dtsim/profiler/host_info.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <sched.h>

#include <algorithm>

namespace dtsim::profiler {

using calib::CollectiveKind;

RepeatPolicy repeat_policy(bool quick) {
    RepeatPolicy p;
    if (quick) {
        p.warmup = 1;
        p.min_samples = 3;
        p.max_samples = 20;
        p.budget_s = 0.02;
    } else {
        p.warmup = 2;
        p.min_samples = 5;
        p.max_samples = 100;
        p.budget_s = 0.15;
    }
    return p;
}

namespace {

// More ranks on this host than CPUs this process may run on (oversubscribed):
// ranks then take turns on the cores.
bool ranks_outnumber_cores() {
    MPI_Comm local = MPI_COMM_NULL;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    int local_ranks = 1;
    MPI_Comm_size(local, &local_ranks);
    MPI_Comm_free(&local);
    cpu_set_t set;
    CPU_ZERO(&set);
    const int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    int outnumber = local_ranks > cpus ? 1 : 0, any = 0;
    MPI_Allreduce(&outnumber, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any != 0;
}

// The repeat policy of this machine: long samples where ranks take turns on
// the cores (RepeatPolicy::min_sample_us), so that a sample sees many turns.
RepeatPolicy machine_policy(bool quick) {
    RepeatPolicy p = repeat_policy(quick);
    if (ranks_outnumber_cores()) p.min_sample_us = quick ? 30e3 : 100e3;
    return p;
}

// A data-parallel step runs at the pace of its slowest rank (every rank waits
// at the next collective), and cores are not equal (siblings, neighbours): the
// calibration keeps the slowest rank's figure, like the collectives' time
// columns. It is then also the same on every rank.
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

// Streaming and copy bandwidth, the cost of a tiny pass and CPU Adam: the
// memory-bound figures, which all ranks of a host share.
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

// Measured GEMM points replace those of the same shape, or join them.
void merge_gemm_points(std::vector<calib::GemmPoint>& into, const std::vector<calib::GemmPoint>& fresh) {
    for (const auto& p : fresh) {
        auto same = std::find_if(into.begin(), into.end(), [&](const calib::GemmPoint& q) {
            return q.dtype == p.dtype && q.m == p.m && q.n == p.n && q.k == p.k && q.batch == p.batch;
        });
        if (same != into.end())
            *same = p;
        else
            into.push_back(p);
    }
}

}  // namespace

calib::Calibration refresh_cpu_calibration(const calib::Calibration& base, const CpuCalibrationOptions& targets) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    // The full run's repeats: there are few targets, and their figures must
    // hold as well as the calibration's they replace.
    const RepeatPolicy policy = machine_policy(false);
    calib::Calibration c = base;
    std::vector<calib::GemmPoint> fresh = bench_gemm(targets.extra_gemm_shapes, policy, {});
    for (auto& p : fresh) p.time_us = slowest_time(p.time_us);
    merge_gemm_points(c.gemm_points, fresh);
    if (!c.gemm_curves.empty() && !fresh.empty()) {
        // Refit so that the curve and its points describe the same state of the machine.
        std::erase_if(c.gemm_curves, [](const calib::GemmCurve& g) { return g.dtype == DType::fp32; });
        c.gemm_curves.push_back(fit_gemm_curve(DType::fp32, 0, c.gemm_points));
    }
    measure_memory_and_adam(c, policy, {});

    if (size > 1 && !targets.extra_collective_sizes.empty()) {
        CollectiveSweep sweep;
        for (const auto& [kind, bytes] : targets.extra_collective_sizes)
            if (std::find(sweep.kinds.begin(), sweep.kinds.end(), kind) == sweep.kinds.end())
                sweep.kinds.push_back(kind);
        sweep.extra_sizes = targets.extra_collective_sizes;
        sweep.only_extra_sizes = true;
        const auto rows = bench_mpi_collectives(sweep, policy, {});
        for (CollectiveKind kind : sweep.kinds) {
            const std::vector<CollectiveRow> of_kind = rows_of_kind(rows, kind);
            auto curve = std::find_if(c.collectives.begin(), c.collectives.end(), [&](const calib::CollectiveCurve& k) {
                return k.kind == kind && k.scope == calib::LinkScope::intra_node && k.group_size == size;
            });
            std::vector<calib::CollectivePoint> points = points_of(of_kind);
            if (curve != c.collectives.end())
                for (const auto& old : curve->points)
                    if (std::none_of(points.begin(), points.end(),
                                     [&](const calib::CollectivePoint& p) { return p.size_bytes == old.size_bytes; }))
                        points.push_back(old);
            calib::CollectiveCurve fitted = fit_collective(kind, calib::LinkScope::intra_node, size, points);
            if (curve != c.collectives.end())
                *curve = std::move(fitted);
            else
                c.collectives.push_back(std::move(fitted));
        }
    }
    c.provenance.notes += "; refreshed (targets, memory, Adam) at " + utc_timestamp();
    return c;
}

calib::Calibration calibrate_cpu(const CpuCalibrationOptions& o, const ProgressFn& progress,
                                 const std::function<void(std::string_view)>& report) {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const RepeatPolicy policy = machine_policy(o.quick);
    auto phase = [&](double begin, double end) {
        return [&progress, begin, end](std::string_view what, double f) { progress(what, begin + (end - begin) * f); };
    };
    calib::Calibration c;
    const HostInfo host = host_info();
    c.name = o.name.empty() ? fmt::format("{}-cpu-{}ranks", host.hostname, size) : o.name;
    c.provenance.source = "measured";
    c.provenance.machine = fmt::format("{} ({})", host.hostname, host.cpu_model);
    c.provenance.date = utc_timestamp();
    c.provenance.backend = "cpu-mpi-openblas";
    c.provenance.world_size = size;
    c.provenance.notes =
        fmt::format("{}; OpenBLAS {}; OPENBLAS_CORETYPE={}; one BLAS thread per rank; {} run", host.mpi, host.blas,
                    host.openblas_coretype.empty() ? "unset" : host.openblas_coretype, o.quick ? "quick" : "full");

    // Every rank measures at once, as ranks share the machine in training; rank 0 reports.
    std::vector<GemmShape> shapes = default_gemm_shapes(o.quick);
    shapes.insert(shapes.end(), o.extra_gemm_shapes.begin(), o.extra_gemm_shapes.end());
    c.gemm_points = bench_gemm(shapes, policy, phase(0.0, 0.35));
    for (auto& p : c.gemm_points) p.time_us = slowest_time(p.time_us);
    // A CPU has no datasheet peak here: the fit estimates it as the rate large GEMMs approach.
    c.gemm_curves.push_back(fit_gemm_curve(DType::fp32, 0, c.gemm_points));

    progress("memory bandwidth", 0.35);
    measure_memory_and_adam(c, policy, phase(0.35, 0.40));
    progress("file write and read (NVMe offload path)", 0.40);
    FileIoResult io = bench_file_io(o.io_dir, o.quick ? (16LL << 20) : (256LL << 20), policy);
    c.host.nvme_read_gbps = slowest_rate(io.read_gbps);
    c.host.nvme_write_gbps = slowest_rate(io.write_gbps);
    c.device.name = fmt::format("CPU rank ({})", host.cpu_model);
    c.device.memory_bytes = host.memory_bytes / std::max(1, size);
    c.device.reserved_bytes = 0;
    c.gpus_per_node = size;

    if (size > 1) {
        CollectiveSweep sweep;
        sweep.kinds = {CollectiveKind::allreduce, CollectiveKind::reduce_scatter, CollectiveKind::allgather,
                       CollectiveKind::broadcast};
        sweep.min_bytes = 1024;
        sweep.max_bytes = o.quick ? (1LL << 20) : (256LL << 20);
        sweep.factor = o.quick ? 4 : 2;
        sweep.extra_sizes = o.extra_collective_sizes;
        const auto rows = bench_mpi_collectives(sweep, policy, phase(0.5, 0.95));
        for (CollectiveKind kind : sweep.kinds) {
            const std::vector<CollectiveRow> of_kind = rows_of_kind(rows, kind);
            report(
                fmt::format("{} over {} ranks:\n{}\n", to_string(kind), size, format_nccl_tests_table(of_kind, size)));
            c.collectives.push_back(fit_collective(kind, calib::LinkScope::intra_node, size, points_of(of_kind)));
        }
        progress("overlap of compute and communication", 0.95);
        c.overlap = bench_overlap(o.quick, policy);
    }
    progress("overlap of compute and host work", 0.97);
    bench_host_overlap(o.quick, policy, c.overlap);
    return c;
}

}  // namespace dtsim::profiler
