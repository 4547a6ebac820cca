// `mpirun -np N dtsim execute`: run the configuration's Plan for real on the
// CPU backend (MPI + OpenBLAS) or the CUDA backend (NCCL + cuBLAS, one GPU per
// rank) and record when every task ran.
#include "all_ranks.hpp"
#include "commands.hpp"
#include "config_options.hpp"
#include "dtsim/common/error.hpp"
#include "dtsim/common/json_io.hpp"
#include "dtsim/executor/execute.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/strategy.hpp"
#include "dtsim/traces/chrome_trace.hpp"
#ifdef DTSIM_HAVE_CUDA
#include "dtsim/executor/execute_cuda.hpp"
#endif

#include <fmt/format.h>
#include <mpi.h>

#include <memory>

namespace dtsim::cli {
namespace {

struct ExecuteOptions {
    SimulateOptions config;
    int steps = 5;
    std::string mode = "auto";
    std::string backend = "cpu";
    double learning_rate = 1e-2;
    double fault_timeout_s = 30;
    std::string io_dir;
    std::string allocator = "dtsim";
    std::string torch_version;  // --backend gloo: the torch stood in for (how its gloo sums fp16)
};

// Real training where the executor can (MLPs in fp32 under DDP, FSDP, ZeRO
// without offload, on the CPU backend), replay elsewhere.
executor::Mode choose_mode(const std::string& requested, const std::string& backend, const sim::Config& c) {
    if (requested != "auto") return executor::mode_from_string(requested);
    if (backend == "cuda") return executor::Mode::replay;
    const bool trainable = c.model.rfind("mlp-", 0) == 0 && c.precision == sim::Precision::fp32;
    return trainable ? executor::Mode::train : executor::Mode::replay;
}

// The chosen backend's execute(); the CUDA one throws "no CUDA device: ..."
// where no GPU is usable.
executor::ExecResult run_backend(const std::string& backend, const sim::Plan& plan, const models::Workload& w,
                                 const sim::Config& config, const executor::ExecOptions& options) {
    if (backend != "cuda") return executor::execute(plan, w, config, options);
#ifdef DTSIM_HAVE_CUDA
    return executor::execute_cuda(plan, w, config, options);
#else
    throw ConfigError("--backend cuda: this dtsim was built without the CUDA toolkit; use --backend cpu.");
#endif
}

void run_execute(const ExecuteOptions& o) {
    if (print_knob_help_if_asked(o.config)) return;
    const bool torch_allocator = o.allocator == "torch";
    executor::ensure_mpi(/*reuse_freed_memory_in_process=*/!torch_allocator);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    on_all_ranks([&] {
        sim::Config config = make_config(o.config);
        config.topology = {1, size};  // the ranks mpirun started, on this machine
        config.host_memory_reuse = !torch_allocator;  // the Plan's gradients pay first touch under torch's
        config.collectives_block_compute = o.backend != "cuda";  // a CPU rank waits in synchronous collectives
        if (o.steps < 1) throw ConfigError(fmt::format("--steps must be >= 1 (got {})", o.steps));
        const models::Workload workload = sim::build_workload(config);
        const sim::Plan plan = sim::lower(workload, config);
        executor::ExecOptions options;
        options.steps = o.steps;
        options.mode = choose_mode(o.mode, o.backend, config);
        options.learning_rate = o.learning_rate;
        options.fault_timeout_s = o.fault_timeout_s;
        options.scratch_dir = o.io_dir;
        options.transport = o.backend == "gloo" ? runtime::CommBackend::gloo : runtime::CommBackend::mpi;
        options.half_sum = torch_version_half_sum(o.torch_version, o.backend);
        options.fresh_gradients = torch_allocator;
        if (torch_allocator && options.mode != executor::Mode::train)
            throw ConfigError("--allocator torch: frees and reallocates real gradients, so it needs train mode "
                              "(an fp32 MLP on the cpu or gloo backend, --mode train or auto)");
        if (!o.config.trace.empty())
            options.write_partial_trace = [&o](const sim::Timeline& t) {
                traces::write_chrome_trace(t, o.config.trace);
            };
        executor::ExecResult result;
        try {
            result = run_backend(o.backend, plan, workload, config, options);
        } catch (const ConfigError&) {
            // auto: what cannot train for real (offload, hooks, ...) replays; every rank
            // decides the same before any communication.
            if (o.mode != "auto" || options.mode != executor::Mode::train || options.fresh_gradients) throw;
            options.mode = executor::Mode::replay;
            result = run_backend(o.backend, plan, workload, config, options);
        }
        if (rank != 0) return;
        const auto json = [&] {
            Json j = {{"model", config.model},
                      {"strategy", config.strategy},
                      {"world_size", size},
                      {"backend", o.backend},
                      {"mode", std::string(executor::to_string(result.mode))},
                      {"steps", result.steps},
                      {"step_time_s", result.step_time_s},
                      {"median_step_time_s", result.median_step_time_s},
                      {"peak_memory_bytes", result.peak_memory_bytes},
                      {"peak_rss_bytes", result.peak_rss_bytes},
                      {"page_faults_per_step", result.page_faults_per_step},
                      {"loss", result.loss},
                      {"notes", result.notes}};
            return j.dump(2);
        };
        o.config.report.print({.text = [&] { return executor::format_execution_summary(result); }, .json = json});
        if (!o.config.trace.empty()) {
            traces::write_chrome_trace(result.timeline, o.config.trace);
            o.config.report.note(fmt::format("  Measured trace written to {}", o.config.trace));
        }
    });
}

}  // namespace

void add_execute_command(CLI::App& app) {
    auto o = std::make_shared<ExecuteOptions>();
    auto* cmd = app.add_subcommand("execute",
                                   "run a configuration for real on this machine's ranks (CPU backend: "
                                   "MPI + OpenBLAS; CUDA backend: NCCL + cuBLAS) and record each task");
    add_options(*cmd, o->config, true, /*with_topology=*/false);
    o->config.report.add_option(*cmd, {"text", "json"}, "output: text or json");
    cmd->add_option("--steps", o->steps, "training steps to run (the first is warm-up)")->capture_default_str();
    cmd->add_option(
           "--mode", o->mode,
           "train (real MLP training under DDP, FSDP or ZeRO), replay (every op at its shapes on scratch buffers), or "
           "auto")
        ->check(CLI::IsMember({"auto", "train", "replay"}))
        ->capture_default_str();
    cmd->add_option(
           "--backend", o->backend,
           "cpu: OpenBLAS GEMMs, MPI collectives, memcpy copies, host loops and file I/O, one thread per "
           "stream (replay or train); gloo: the same with gloo's TCP collectives, called as torch's "
           "ProcessGroupGloo calls them (two at a time on its two worker threads; train mode issues DDP's bucket "
           "allreduces without waiting; reduce-scatter as an allreduce of the whole buffer); cuda: one GPU per "
           "rank, cuBLAS GEMMs and memory-pass kernels on the "
           "compute stream, NCCL on each communication stream, cudaMemcpyAsync on copy streams, timed by "
           "CUPTI (replay only; needs a GPU)")
        ->check(CLI::IsMember({"cpu", "gloo", "cuda"}))
        ->capture_default_str();
    cmd->add_option("--lr", o->learning_rate, "learning rate in train mode")->capture_default_str();
    cmd->add_option("--fault-timeout", o->fault_timeout_s,
                    "stop every rank when none makes progress for this many seconds (0: never); rank 0 then "
                    "writes the completed steps to --trace (CPU backend)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    cmd->add_option("--allocator", o->allocator,
                    "dtsim: freed memory stays in the process (one malloc arena, no mmap, no trim) and gradients "
                    "are kept across steps; torch: glibc's default malloc, and every gradient freed at the step's "
                    "end and allocated again in backward, as torch's zero_grad(set_to_none=True) does, so that "
                    "each step pays the first touch of its gradient pages (train mode)")
        ->check(CLI::IsMember({"dtsim", "torch"}))
        ->capture_default_str();
    add_torch_version_option(*cmd, o->torch_version);
    cmd->add_option("--io-dir", o->io_dir,
                    "directory for the NVMe-offload file I/O tasks' files (default: the system temp directory); "
                    "put it on the disk offload would use")
        ->check(CLI::ExistingDirectory);
    cmd->footer(
        "Examples:\n  mpirun -np 2 ./dtsim execute --model mlp-4x512 --micro-batch 32 --steps 10 "
        "--trace measured.json\n"
        "  mpirun -np 2 ./dtsim execute --backend gloo --model mlp-4x512 --micro-batch 32 --steps 10   # as torch's "
        "gloo\n"
        "  mpirun -np 8 ./dtsim execute --backend cuda --model gpt2 --precision bf16-mixed --steps 5   # one rank "
        "per GPU");
    cmd->callback([o] { run_execute(*o); });
}

}  // namespace dtsim::cli
