// The CPU calibration: every benchmark of the CPU backend, fitted into a
// Calibration. Every rank of MPI_COMM_WORLD measures at once, as ranks share
// the machine in training; the result is the same on every rank.
#include "dtsim/profiler/calibrate_cpu.hpp"

#include "cpu_calibration_parts.hpp"

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

std::string cpu_backend_name(runtime::CommBackend transport) {
    return fmt::format("cpu-{}-openblas", runtime::to_string(transport));
}

runtime::CommBackend transport_of(const calib::Calibration& c) {
    return c.provenance.gloo_collectives() ? runtime::CommBackend::gloo : runtime::CommBackend::mpi;
}

runtime::HalfSum half_sum_of(const calib::Calibration& c) {
    return c.provenance.half_sum == runtime::to_string(runtime::HalfSum::gloo) ? runtime::HalfSum::gloo
                                                                                : runtime::HalfSum::c10;
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
    if (const std::string slow = blas_kernel_warning(host); !slow.empty() && rank == 0) report("warning: " + slow);
    const bool gloo = o.transport == runtime::CommBackend::gloo;
    c.name = o.name.empty() ? fmt::format("{}-cpu-{}ranks{}", host.hostname, size, gloo ? "-gloo" : "") : o.name;
    c.provenance.source = "measured";
    c.provenance.machine = machine_name(host);
    c.provenance.date = utc_timestamp();
    c.provenance.backend = cpu_backend_name(o.transport);
    c.provenance.world_size = size;
    c.provenance.sampling = describe(policy);
    if (gloo) c.provenance.half_sum = runtime::to_string(o.half_sum);
    c.provenance.notes =
        fmt::format("{}{}; OpenBLAS {}; OPENBLAS_CORETYPE={}; one BLAS thread per rank; {} run", host.mpi,
                    !gloo                              ? ""
                    : o.half_sum == runtime::HalfSum::c10 ? "; collectives over gloo (TCP, as torch's ProcessGroupGloo)"
                                                       : "; collectives over gloo (TCP, as torch's ProcessGroupGloo; "
                                                         "fp16 sums in gloo::float16, as torch before 2.8)",
                    host.blas,
                    host.openblas_coretype.empty() ? "unset" : host.openblas_coretype, o.quick ? "quick" : "full");

    // Every rank measures at once, as ranks share the machine in training; rank 0 reports.
    std::vector<GemmShape> shapes = default_gemm_shapes(o.quick);
    const auto probes = layout_probe_shapes(o.quick);
    shapes.insert(shapes.end(), probes.begin(), probes.end());
    for (const auto& s : o.targets.gemm_shapes)  // a model's shapes, at the layouts it runs them with
        if (std::find(shapes.begin(), shapes.end(), s) == shapes.end()) shapes.push_back(s);
    c.gemm_points = bench_gemm(shapes, policy, phase(0.0, 0.35));
    for (auto& p : c.gemm_points) p.time_us = pace_time(p.time_us);
    // A CPU has no datasheet peak here: the fit estimates it as the rate large GEMMs approach.
    c.gemm_curves.push_back(fit_gemm_curve(DType::fp32, 0, c.gemm_points));

    progress("memory bandwidth", 0.35);
    measure_memory_and_adam(c, policy, phase(0.35, 0.40));
    progress("file write and read (NVMe offload path)", 0.40);
    FileIoResult io = bench_file_io(o.io_dir, o.quick ? (16LL << 20) : (256LL << 20), policy);
    c.host.nvme_read_gbps = pace_rate(io.read_gbps);
    c.host.nvme_write_gbps = pace_rate(io.write_gbps);
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
        sweep.extra_sizes = o.targets.collective_sizes;
        sweep.fp16_allreduce = true;  // the fp16 hook's call; gloo sums half slower per byte than float
        const auto comm = runtime::make_communicator(o.transport, MPI_COMM_WORLD, o.half_sum);
        const auto rows = bench_collectives(sweep, policy, phase(0.5, 0.95), *comm);
        for (CollectiveKind kind : sweep.kinds) {
            const std::vector<CollectiveRow> of_kind = rows_of_kind(rows, kind);
            report(
                fmt::format("{} over {} ranks:\n{}\n", to_string(kind), size, format_nccl_tests_table(of_kind, size, runtime::to_string(o.transport))));
            c.collectives.push_back(fit_collective(kind, calib::LinkScope::intra_node, size, points_of(of_kind)));
        }
        const std::vector<CollectiveRow> half = rows_of_kind(rows, CollectiveKind::allreduce, DType::fp16);
        report(fmt::format("allreduce in fp16 over {} ranks:\n{}\n", size,
                           format_nccl_tests_table(half, size, runtime::to_string(o.transport))));
        c.collectives.push_back(
            fit_collective(CollectiveKind::allreduce, calib::LinkScope::intra_node, size, points_of(half)));
        c.collectives.back().dtype = DType::fp16;
        progress("overlap of compute and communication", 0.95);
        c.overlap = bench_overlap(o.quick, policy, *comm);
        progress("ranks apart: the same compute on every rank", 0.96);
        measure_stragglers(c, o.quick);
    }
    progress("overlap of compute and host work", 0.97);
    bench_host_overlap(o.quick, policy, c.overlap);
    return c;
}

}  // namespace dtsim::profiler
