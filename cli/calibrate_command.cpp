// `dtsim calibrate`: measure this machine (CPU backend: OpenBLAS + MPI) or
// import nccl-tests output, and write a Calibration JSON that every command
// takes with --hardware.
#include "all_ranks.hpp"
#include "commands.hpp"
#include "config_options.hpp"
#include "dtsim/common/error.hpp"
#include "dtsim/executor/calibration_targets.hpp"
#include "dtsim/models/model_registry.hpp"
#include "dtsim/profiler/calibrate_cpu.hpp"
#include "dtsim/profiler/collective_benchmarks.hpp"
#include "dtsim/profiler/cpu_benchmarks.hpp"
#include "dtsim/profiler/fit.hpp"
#include "dtsim/profiler/host_info.hpp"
#include "dtsim/profiler/mpi_init.hpp"
#include "dtsim/profiler/nccl_log_import.hpp"
#include "dtsim/profiler/nccl_tests_import.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/nccl_model.hpp"
#include "format_units.hpp"
#include "progress.hpp"
#include "reporter.hpp"

#include <fmt/format.h>
#include <mpi.h>
#include <nlohmann/json.hpp>

#ifdef DTSIM_HAVE_CUDA
#include "dtsim/profiler/cuda_benchmarks.hpp"
#include "dtsim/profiler/cuda_devices.hpp"
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <memory>

namespace dtsim::cli {
namespace {

using calib::Calibration;
using calib::CollectiveKind;

struct CalibrateOptions {
    std::string backend = "cpu";
    std::string out = "calibration.json";
    bool quick = false;
    std::string model;
    std::int64_t seq_len = 128;  // 0: the model's own (1 for MLPs and images)
    std::int64_t micro_batch = 1;
    std::string io_dir = ".";
    std::string name;
    std::vector<std::string> import_nccl_tests;
    std::string import_nccl_log;
    std::string base = "h100-sxm";
    std::string torch_version;  // --backend gloo: the torch to predict (how its gloo sums fp16)
    std::string scope = "intra_node";
    std::string nccl_tests_group = "out-of-place";
    Reporter report;
};

// What `--format json` prints once the calibration is written: where, what it
// holds and where it came from (the file itself has every figure).
std::string written_json(const Calibration& c, const std::string& out, const std::vector<std::string>& left_out,
                         const std::vector<std::string>& checks = {}) {
    nlohmann::ordered_json j = {{"out", out},
                                {"name", c.name},
                                {"backend", c.provenance.backend},
                                {"source", c.provenance.source},
                                {"machine", c.provenance.machine},
                                {"date", c.provenance.date},
                                {"world_size", c.provenance.world_size},
                                {"gemm_points", c.gemm_points.size()},
                                {"collective_curves", c.collectives.size()},
                                {"notes", c.provenance.notes},
                                {"sampling", c.provenance.sampling},
                                {"left_out", left_out}};
    if (!checks.empty()) j["checks"] = checks;
    return j.dump(2);
}

// The ranks of this calibration (MPI started here when mpirun did not).
class MpiSession {
public:
    MpiSession() {
        profiler::ensure_mpi();
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &size_);
    }
    int rank() const { return rank_; }
    int size() const { return size_; }

private:
    int rank_ = 0, size_ = 1;
};

// The GEMM shapes a model runs at `micro_batch` x `seq_len`; models without a
// sequence dimension (MLPs, images) ignore `seq_len`.
std::vector<profiler::GemmShape> model_gemm_shapes(const std::string& model, std::int64_t micro_batch,
                                                   std::int64_t seq_len, int& skipped,
                                                   double max_flops = executor::kCpuMaxGemmFlops) {
    models::WorkloadRequest request;
    request.model = model;
    request.micro_batch = micro_batch;
    request.seq_len = models::has_sequence_dimension(model) ? seq_len : 0;
    return executor::gemm_shapes(models::build_workload(request), skipped, max_flops);
}

void check_io_dir(const std::string& dir) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
        throw ConfigError(
            fmt::format("--io-dir {}: not a directory (the NVMe-offload benchmark writes a file there)", dir));
}

Calibration measure_cpu(const CalibrateOptions& o, const MpiSession& mpi, ProgressBar& bar) {
    profiler::CpuCalibrationOptions options;
    options.quick = o.quick;
    options.io_dir = o.io_dir;
    options.name = o.name;
    options.transport = o.backend == "gloo" ? runtime::CommBackend::gloo : runtime::CommBackend::mpi;
    options.half_sum = torch_version_half_sum(o.torch_version, o.backend);
    int skipped = 0;
    if (!o.model.empty()) options.targets.gemm_shapes = model_gemm_shapes(o.model, o.micro_batch, o.seq_len, skipped);
    const Calibration c = profiler::calibrate_cpu(
        options, [&](std::string_view what, double f) { bar.update(what, f); },
        [&](std::string_view text) {
            if (mpi.rank() != 0) return;
            bar.finish("");
            o.report.note(std::string(text.substr(0, text.size() - (text.ends_with('\n') ? 1 : 0))));
        });
    if (mpi.rank() == 0 && skipped > 0)
        o.report.note(fmt::format("note: {} GEMM shapes of {} were too large for a CPU benchmark and are interpolated",
                                  skipped, o.model));
    return c;
}

#ifdef DTSIM_HAVE_CUDA
template <class T>
T require(profiler::cuda::CudaResult<T> r, const char* what) {
    if (!r) throw CalibrationError(fmt::format("--backend cuda: {} failed: {}", what, r.error));
    return std::move(*r.value);
}

// The CUDA backend: cuBLAS GEMMs (CUPTI device times), NCCL collectives over
// MPI, host copies and overlap. What it does not measure (memory bandwidth of
// streaming kernels, NVMe, CPU Adam) comes from --base, as the notes say.
Calibration measure_cuda(const CalibrateOptions& o, const MpiSession& mpi, ProgressBar& bar) {
    if (const std::string why = profiler::cuda::cuda_unavailable_reason(); !why.empty())
        throw CalibrationError(
            fmt::format("--backend cuda: {}. Run it on the GPU machine (one rank per GPU: "
                        "mpirun -np <gpus> ./dtsim calibrate --backend cuda), or use --backend cpu",
                        why));
    const profiler::RepeatPolicy policy = profiler::repeat_policy(o.quick);
    auto phase = [&](double begin, double end) {
        return [&bar, begin, end](std::string_view what, double f) { bar.update(what, begin + (end - begin) * f); };
    };
    Calibration c = calib::load_hardware(o.base, "--base");
    const profiler::HostInfo host = profiler::host_info();
    const auto devices = calib::cuda::query_devices();
    c.name = o.name.empty() ? fmt::format("{}-cuda-{}ranks", host.hostname, mpi.size()) : o.name;
    c.provenance.source = "measured";
    c.provenance.machine = host.hostname;
    c.provenance.date = profiler::utc_timestamp();
    c.provenance.backend = "cuda-nccl-cublas";
    c.provenance.sampling = profiler::describe(policy);
    c.provenance.world_size = mpi.size();
    if (!devices.devices.empty()) {
        c.device.name = devices.devices.front().name;
        c.device.memory_bytes = devices.devices.front().memory_bytes;
    }
    auto shapes = profiler::cuda::gpu_gemm_shapes(o.quick);
    if (!o.model.empty()) {
        int skipped = 0;  // a GPU runs every shape a model has
        const auto of_model = model_gemm_shapes(o.model, o.micro_batch, o.seq_len, skipped, HUGE_VAL);
        shapes.insert(shapes.end(), of_model.begin(), of_model.end());
        std::sort(shapes.begin(), shapes.end());
        shapes.erase(std::unique(shapes.begin(), shapes.end()), shapes.end());
    }
    c.gemm_points =
        require(profiler::cuda::bench_cublas_gemm(shapes, DType::fp32, policy, phase(0.0, 0.2)), "fp32 GEMMs");
    const auto bf16 =
        require(profiler::cuda::bench_cublas_gemm(shapes, DType::bf16, policy, phase(0.2, 0.4)), "bf16 GEMMs");
    c.gemm_points.insert(c.gemm_points.end(), bf16.begin(), bf16.end());
    // Keep the base's datasheet peaks; fit the efficiency shape to the measurements.
    for (auto& curve : c.gemm_curves) {
        std::vector<calib::GemmPoint> of_dtype;
        for (const auto& p : c.gemm_points)
            if (p.dtype == curve.dtype) of_dtype.push_back(p);
        if (!of_dtype.empty())
            curve = profiler::fit_gemm_curve(curve.dtype, curve.peak_tflops, of_dtype, /*alignment_classes=*/true);
    }
    bar.update("host<->device copies", 0.4);
    const auto copies =
        require(profiler::cuda::bench_host_copies(o.quick ? (16LL << 20) : (256LL << 20), policy), "host copies");
    c.host.h2d_pinned_gbps = copies.h2d_pinned_gbps;
    c.host.d2h_pinned_gbps = copies.d2h_pinned_gbps;
    c.host.h2d_pageable_gbps = copies.h2d_pageable_gbps;
    c.host.d2h_pageable_gbps = copies.d2h_pageable_gbps;
    bar.update("device memory bandwidth", 0.43);
    // The memory-pass model prices a vectorized elementwise op at bytes /
    // (mem_bw x elementwise_efficiency). torch's vectorized kernels ran at
    // 0.97-1.08x the copy rate on an H100 and an H200 (bench/results/cuda.md),
    // so against the measured copy rate the efficiency is 1. The element rate of
    // the non-vectorized kernels is the base's.
    c.device.mem_bw_gbps =
        require(profiler::cuda::bench_device_copy(o.quick ? (64LL << 20) : (1LL << 30), policy), "device copy");
    c.device.elementwise_efficiency = 1.0;
    std::string nccl = profiler::cuda::nccl_provenance();
    if (mpi.size() > 1) {
        profiler::CollectiveSweep sweep;
        sweep.kinds = {CollectiveKind::allreduce, CollectiveKind::reduce_scatter, CollectiveKind::allgather,
                       CollectiveKind::broadcast};
        sweep.max_bytes = o.quick ? (1LL << 20) : (1LL << 30);
        const auto result = require(profiler::cuda::bench_nccl_collectives(sweep, policy, phase(0.45, 0.9)), "NCCL");
        nccl = result.provenance;
        std::erase_if(c.collectives,
                      [](const calib::CollectiveCurve& x) { return x.scope == calib::LinkScope::intra_node; });
        for (CollectiveKind kind : sweep.kinds) {
            const std::vector<profiler::CollectiveRow> of_kind = profiler::rows_of_kind(result.rows, kind);
            if (mpi.rank() == 0) o.report.note(profiler::format_nccl_tests_table(of_kind, mpi.size(), "nccl"));
            c.collectives.push_back(
                profiler::fit_collective(kind, calib::LinkScope::intra_node, mpi.size(), profiler::points_of(of_kind)));
        }
        bar.update("overlap of compute and NCCL", 0.92);
        c.overlap = require(profiler::cuda::bench_cuda_overlap(o.quick, policy), "overlap");
    }
    c.provenance.notes =
        fmt::format("{}; {}; non-vectorized element rate, NVMe, CPU Adam and inter-node links from {}", nccl, host.mpi, o.base);
    return c;
}
#endif

// nccl-tests output becomes the collective part of a calibration whose other
// parts come from --base. Each table prices its own element type (the `type`
// column); types dtsim does not price (integers, double, fp8) are left out and
// named. `skipped` receives one line per table left out.
Calibration import_nccl_tests(const CalibrateOptions& o, std::vector<std::string>& skipped) {
    Calibration c = calib::load_hardware(o.base, "--base");
    if (o.import_nccl_tests.empty()) return c;
    const calib::LinkScope scope = calib::link_scope_from_string(o.scope);
    const auto group = profiler::nccl_tests_group_from_string(o.nccl_tests_group);
    std::vector<std::string> imported;
    for (const auto& file : o.import_nccl_tests)
        for (const auto& run : profiler::read_nccl_tests(file, group)) {
            if (!run.dtype) {
                skipped.push_back(fmt::format("{} x{} of type {} from {}", to_string(run.kind), run.nranks, run.type,
                                              file));
                continue;
            }
            std::erase_if(c.collectives, [&](const calib::CollectiveCurve& x) {
                return x.kind == run.kind && x.scope == scope && x.group_size == run.nranks && x.dtype == *run.dtype;
            });
            auto curve = profiler::fit_collective(run.kind, scope, run.nranks, run.points);
            curve.dtype = *run.dtype;
            c.collectives.push_back(std::move(curve));
            imported.push_back(fmt::format("{} {} x{} {} from {}", to_string(run.kind), to_string(*run.dtype),
                                           run.nranks, to_string(run.group), file));
        }
    if (imported.empty())
        throw ConfigError(fmt::format("--import-nccl-tests: no table of a type dtsim prices in {} (found {}); "
                                      "dtsim prices nccl-tests' float, half and bfloat16 tables",
                                      fmt::join(o.import_nccl_tests, ", "), fmt::join(skipped, "; ")));
    c.name = o.name.empty() ? c.name + "+nccl-tests" : o.name;
    c.provenance.source = "measured";
    c.provenance.date = profiler::utc_timestamp();
    c.provenance.backend = fmt::format("{}+nccl-tests", c.provenance.backend);
    c.provenance.notes =
        fmt::format("collectives imported from nccl-tests ({}); the rest from {}", fmt::join(imported, "; "), o.base);
    return c;
}

// NCCL's own tuning table from the log against dtsim's NCCL model for the
// same communicator, with the log's graphs: how far dtsim's latencies and
// bandwidths are from NCCL's, cell by cell. Empty where the log has no table.
std::vector<std::string> check_nccl_tuning(const calib::NcclTopology& t, const profiler::NcclLog& log) {
    if (log.tuning.empty())
        return {
            fmt::format("{} has no tuning table to check dtsim's NCCL model against (rank 0 prints it with "
                        "NCCL_DEBUG_SUBSYS=TUNING)",
                        log.file)};
    struct Worst {
        double error = -1;
        std::string what;
    };
    std::vector<double> latency_errors, bandwidth_errors;
    Worst worst_latency, worst_bandwidth;
    std::vector<std::string> nccl_only, dtsim_only;
    for (const calib::CollectiveKind kind :
         {calib::CollectiveKind::allreduce, calib::CollectiveKind::reduce_scatter, calib::CollectiveKind::allgather,
          calib::CollectiveKind::broadcast, calib::CollectiveKind::reduce}) {
        const auto table = sim::nccl_tuning_table(t, kind, log.ranks, log.nodes, DType::bf16, {});
        for (const auto& cell : log.tuning) {
            if (cell.function != sim::nccl_function_name(kind)) continue;
            const auto it = std::find_if(table.begin(), table.end(), [&](const sim::NcclTableCell& d) {
                return sim::to_string(d.algo) == cell.algorithm && sim::to_string(d.proto) == cell.protocol;
            });
            const std::string what = fmt::format("{} {}/{}", cell.function, cell.algorithm, cell.protocol);
            if (cell.algbw_gbps <= 0) {
                if (it != table.end()) dtsim_only.push_back(what);
                continue;
            }
            if (it == table.end()) {
                nccl_only.push_back(what);
                continue;
            }
            const auto note = [&](double nccl, double mine, std::vector<double>& errors, Worst& worst,
                                  std::string_view unit) {
                if (nccl <= 0) return;
                const double e = std::abs(mine / nccl - 1);
                errors.push_back(e);
                if (e > worst.error)
                    worst = {e, fmt::format("{} {} NCCL {:.1f}, dtsim {:.1f}", what, unit, nccl, mine)};
            };
            note(cell.latency_us, it->latency_us, latency_errors, worst_latency, "latency (us)");
            note(cell.algbw_gbps, it->algbw_gbps, bandwidth_errors, worst_bandwidth, "bandwidth (GB/s)");
        }
    }
    const auto median = [](std::vector<double> v) {
        if (v.empty()) return 0.0;
        std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
        return v[v.size() / 2];
    };
    std::vector<std::string> out;
    out.push_back(fmt::format(
        "NCCL's own tuning table for these {} ranks on {} node{} against dtsim's NCCL model with its graphs: "
        "{} cells; bandwidth median {:.1f} %, largest {:.1f} % ({}); latency median {:.1f} %, largest {:.1f} % ({})",
        log.ranks, log.nodes, log.nodes == 1 ? "" : "s", bandwidth_errors.size(), 100 * median(bandwidth_errors),
        100 * std::max(0.0, worst_bandwidth.error), worst_bandwidth.what, 100 * median(latency_errors),
        100 * std::max(0.0, worst_latency.error), worst_latency.what));
    if (!nccl_only.empty())
        out.push_back(fmt::format("NCCL offers what dtsim does not model: {}", fmt::join(nccl_only, ", ")));
    if (!dtsim_only.empty())
        out.push_back(fmt::format("dtsim offers what NCCL has off here: {}", fmt::join(dtsim_only, ", ")));
    return out;
}

void run_calibrate(const CalibrateOptions& o) {
    const bool importing = !o.import_nccl_tests.empty() || !o.import_nccl_log.empty();
    // A wrong --torch-version fails here, before any measuring; an import measures no gloo.
    torch_version_half_sum(o.torch_version, importing ? "" : o.backend);
    if (importing) {
        std::vector<std::string> skipped, checks;
        Calibration c = import_nccl_tests(o, skipped);
        // What was imported, in words: the nccl-tests tables (the notes say which), the log's graphs.
        std::string imported = o.import_nccl_tests.empty() ? "" : c.provenance.notes;
        if (!o.import_nccl_log.empty()) {
            const profiler::NcclLog log = profiler::read_nccl_log(o.import_nccl_log);
            const std::string taken = profiler::use_nccl_log(c, log);
            imported += (imported.empty() ? "" : "; ") + taken;
            if (o.import_nccl_tests.empty()) {
                c.name = o.name.empty() ? c.name + "+nccl-log" : o.name;
                c.provenance.date = profiler::utc_timestamp();
            }
            checks = check_nccl_tuning(c.nccl, log);
        }
        calib::write_calibration(c, o.out);
        o.report.print({.text =
                            [&] {
                                std::string out = fmt::format("wrote {} ({} collective curves; {})\n", o.out,
                                                              c.collectives.size(), imported);
                                for (const auto& s : skipped)
                                    out += fmt::format(
                                        "left out {}: dtsim prices float, half and bfloat16 collectives only\n", s);
                                for (const auto& s : checks) out += s + "\n";
                                return out;
                            },
                        .json = [&] { return written_json(c, o.out, skipped, checks); }});
        return;
    }
#ifndef DTSIM_HAVE_CUDA
    if (o.backend == "cuda")
        throw ConfigError("--backend cuda: this dtsim was built without the CUDA toolkit; use --backend cpu");
#endif
    check_io_dir(o.io_dir);
    MpiSession mpi;
    ProgressBar bar(mpi.rank() == 0);
    on_all_ranks([&] {
#ifdef DTSIM_HAVE_CUDA
        const Calibration c = o.backend == "cuda" ? measure_cuda(o, mpi, bar) : measure_cpu(o, mpi, bar);
#else
        const Calibration c = measure_cpu(o, mpi, bar);
#endif
        if (mpi.rank() == 0) {
            calib::write_calibration(c, o.out);
            const std::string wrote = fmt::format("wrote {} ({} over {} rank{})", o.out, c.provenance.backend,
                                                  mpi.size(), mpi.size() == 1 ? "" : "s");
            if (o.report.json()) {
                bar.finish("");
                o.report.print({.json = [&] { return written_json(c, o.out, {}); }});
            } else {
                bar.finish(wrote);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
    });
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
    auto o = std::make_shared<CalibrateOptions>();
    auto* cmd =
        app.add_subcommand("calibrate", "measure this machine (or import nccl-tests output) into a calibration");
    cmd->add_option("--backend", o->backend,
                    "cpu (OpenBLAS + MPI shared memory), gloo (OpenBLAS + gloo over TCP: what torch.distributed "
                    "runs on CPU; calibrate with it to predict torch) or cuda (cuBLAS + NCCL, needs a GPU)")
        ->check(CLI::IsMember({"cpu", "gloo", "cuda"}))
        ->capture_default_str();
    add_torch_version_option(*cmd, o->torch_version);
    cmd->add_option("--out,-o", o->out, "calibration file to write")->capture_default_str();
    cmd->add_flag("--quick", o->quick, "a small sweep for tests (under 30 s)");
    cmd->add_option("--model", o->model, "also measure exactly the GEMM shapes this model uses (the CPU backend leaves out those over ~1 s of one core)");
    cmd->add_option("--seq-len", o->seq_len,
                    "sequence length for --model's shapes (models without one, MLPs and ResNet, ignore it)")
        ->capture_default_str();
    cmd->add_option("--micro-batch", o->micro_batch, "samples per rank for --model's shapes")->capture_default_str();
    cmd->add_option("--io-dir", o->io_dir, "directory for the file write/read benchmark (the NVMe-offload path)")
        ->capture_default_str();
    cmd->add_option("--name", o->name, "name recorded in the calibration");
    o->report.add_option(*cmd, {"text", "json"},
                         "text, or json: once the file is written, one object saying where, what it holds (GEMM "
                         "points, collective curves) and its provenance; the measured tables then go to stderr");
    cmd->add_option("--import-nccl-tests", o->import_nccl_tests,
                    "nccl-tests output (text table or -J JSON) to turn into collective curves (repeatable)");
    cmd->add_option("--import-nccl-log", o->import_nccl_log,
                    "NCCL's own debug output of a real run (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING, "
                    "NCCL 2.21+): the graphs NCCL's topology search found replace --base's, and NCCL's tuning "
                    "table, where printed, is checked against dtsim's NCCL model")
        ->check(CLI::ExistingFile);
    cmd->add_option("--base", o->base,
                    "with --import-nccl-tests, --import-nccl-log or --backend cuda: preset or calibration for what "
                    "is not measured")
        ->capture_default_str();
    cmd->add_option("--scope", o->scope, "with --import-nccl-tests: intra_node or inter_node")
        ->check(CLI::IsMember({"intra_node", "inter_node"}))
        ->capture_default_str();
    cmd->add_option("--nccl-tests-group", o->nccl_tests_group,
                    "with --import-nccl-tests: which of nccl-tests' two timings to read: out-of-place, or in-place "
                    "(the collective writes into its input, as DDP's bucket allreduce and FSDP's flat buffers do)")
        ->check(CLI::IsMember({"out-of-place", "in-place"}))
        ->capture_default_str();
    cmd->footer(
        "Examples:\n"
        "  mpirun -np 2 ./dtsim calibrate --backend cpu --out cal.json\n"
        "  mpirun -np 2 ./dtsim calibrate --backend gloo --out torch-cpu.json   # to predict torch on CPU\n"
        "  ./dtsim calibrate --import-nccl-tests all_reduce_perf.txt --base h100-sxm --out cal.json\n"
        "  ./dtsim calibrate --import-nccl-tests ar_half.txt --nccl-tests-group in-place --base h100-sxm -o cal.json\n"
        "  ./dtsim calibrate --import-nccl-log nccl_debug.log --base h100-sxm --out cluster.json   # NCCL's own "
        "graphs\n"
        "  ./dtsim simulate --model gpt2 --hardware cal.json --nodes 1 --gpus-per-node 2");
    cmd->callback([o] { run_calibrate(*o); });
}

}  // namespace dtsim::cli
