// The CPU calibration: every benchmark of the CPU backend, fitted into a
// Calibration. Every rank of MPI_COMM_WORLD measures at once, as ranks share
// the machine in training; the result is the same on every rank.
#include "dtsim/profiler/calibrate_cpu.hpp"

#include "dtsim/profiler/collective_benchmarks.hpp"
#include "dtsim/profiler/fit.hpp"
#include "dtsim/profiler/host_info.hpp"

#include <fmt/format.h>
#include <mpi.h>

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

}  // namespace

calib::Calibration calibrate_cpu(const CpuCalibrationOptions& o, const ProgressFn& progress,
                                 const std::function<void(std::string_view)>& report) {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const RepeatPolicy policy = repeat_policy(o.quick);
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
    MemoryResult mem = bench_memory(o.quick, policy, phase(0.35, 0.40));
    mem.stream_gbps = slowest_rate(mem.stream_gbps);
    mem.memcpy_gbps = slowest_rate(mem.memcpy_gbps);
    mem.kernel_overhead_us = slowest_time(mem.kernel_overhead_us);
    progress("file write and read (NVMe offload path)", 0.40);
    FileIoResult io = bench_file_io(o.io_dir, o.quick ? (16LL << 20) : (256LL << 20), policy);
    io.read_gbps = slowest_rate(io.read_gbps);
    io.write_gbps = slowest_rate(io.write_gbps);
    progress("CPU Adam", 0.48);
    const double adam = slowest_rate(bench_cpu_adam_params_per_s(o.quick ? (1 << 20) : (16 << 20), policy));

    c.device.name = fmt::format("CPU rank ({})", host.cpu_model);
    c.device.memory_bytes = host.memory_bytes / std::max(1, size);
    c.device.reserved_bytes = 0;
    c.device.mem_bw_gbps = mem.stream_gbps;
    c.device.elementwise_efficiency = 1.0;  // the measured bandwidth is what a streaming pass gets
    c.device.kernel_overhead_us = mem.kernel_overhead_us;
    c.gpus_per_node = size;
    // "Device" and host are the same memory on the CPU backend: copies run at memcpy speed.
    c.host = {
        mem.memcpy_gbps, mem.memcpy_gbps, mem.memcpy_gbps, mem.memcpy_gbps, adam, io.read_gbps, io.write_gbps, adam};

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
            std::vector<CollectiveRow> of_kind;
            std::vector<calib::CollectivePoint> points;
            for (const auto& r : rows)
                if (r.kind == kind) {
                    of_kind.push_back(r);
                    points.push_back({r.size_bytes, r.time.median_us, r.time.spread});
                }
            report(
                fmt::format("{} over {} ranks:\n{}\n", to_string(kind), size, format_nccl_tests_table(of_kind, size)));
            c.collectives.push_back(fit_collective(kind, calib::LinkScope::intra_node, size, points));
        }
        progress("overlap of compute and communication", 0.95);
        c.overlap = bench_overlap(o.quick, policy);
    }
    progress("overlap of compute and host work", 0.97);
    bench_host_overlap(o.quick, policy, c.overlap);
    return c;
}

}  // namespace dtsim::profiler
