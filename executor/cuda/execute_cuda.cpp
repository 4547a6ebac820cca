// execute_cuda(): the CUDA backend's entry point (execute_cuda.hpp). Checks
// the request and the device, builds each stream's work and the NCCL groups,
// runs the steps and times them from CUPTI (cudaEvent pairs where CUPTI
// cannot), then fills the result as the CPU backend does.
#include "dtsim/executor/execute_cuda.hpp"

#include "cuda_backend.hpp"
#include "dtsim/common/error.hpp"
#include "dtsim/executor/measured_result.hpp"
#include "dtsim/executor/mpi_world.hpp"
#include "dtsim/profiler/cuda_activity.hpp"
#include "dtsim/profiler/cuda_benchmarks.hpp"
#include "dtsim/profiler/nccl_bootstrap.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

namespace dtsim::executor {
namespace {

using sim::TaskKind;

// One rank per GPU: local rank modulo the devices this node has.
int pick_device() {
    int devices = 0;
    DTSIM_CUDA_CHECK(cudaGetDeviceCount(&devices));
    const int device = profiler::cuda::mpi_local_rank() % devices;
    DTSIM_CUDA_CHECK(cudaSetDevice(device));
    return device;
}

std::vector<std::string> replay_notes(const sim::Plan& plan, const sim::Config& config, int device) {
    cudaDeviceProp prop{};
    DTSIM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    const bool fp32 = config.precision == sim::Precision::fp32;
    std::vector<std::string> notes{fmt::format(
        "replay on CUDA device {} ({}) per rank: GEMMs as {} at each op's m, n, k (batched GEMMs as one "
        "strided-batched call where each operand fits in 512 MiB, else looped); elementwise ops, loss, embeddings "
        "and explicit passes as memory-pass kernels over their bytes (at most 256 MiB of scratch, streamed "
        "repeatedly); collectives as NCCL calls on bytes/4 floats, one communicator per stream and group; copies as "
        "cudaMemcpyAsync against pinned or pageable host memory as the Plan says, in chunks of at most 256 MiB.",
        device, prop.name,
        fp32 ? "cublasSgemm"
             : fmt::format("cublasGemmEx ({} inputs, fp32 compute)", to_string(sim::compute_dtype(config.precision))))};
    bool host = false, io = false;
    for (const auto& t : plan.tasks) {
        host = host || t.kind == TaskKind::host_compute;
        io = io || t.kind == TaskKind::io;
    }
    if (host)
        notes.push_back(
            "host tasks: the CPU optimizer runs an Adam loop over its elements on a host thread; fixed-duration "
            "tasks spin.");
    if (io) notes.push_back("I/O tasks write and read a real file on a host thread (page cache, no O_DIRECT).");
    notes.push_back("no fault watchdog on the CUDA backend yet: the fault timeout does not apply.");
    return notes;
}

std::string timing_note(const std::string& cupti_error, int cupti_steps, int steps) {
    const std::string cupti =
        "CUPTI activity records (kernels and memcpys, attributed to tasks by the correlation ids of the runtime and "
        "driver API calls that launched them; host tasks by cuptiGetTimestamp)";
    const std::string events =
        "a cudaEvent pair per task (host tasks by the steady clock, aligned to the GPU's "
        "within a few microseconds)";
    if (!cupti_error.empty())
        return fmt::format("timings: {} in every step; CUPTI unavailable: {}.", events, cupti_error);
    if (cupti_steps == steps) return fmt::format("timings: {} in every step.", cupti);
    return fmt::format("timings: {} in {} of {} steps; {} in the others, where CUPTI lost a task's records.", cupti,
                       cupti_steps, steps, events);
}

}  // namespace

ExecResult execute_cuda(const sim::Plan& plan, const models::Workload& workload, const sim::Config& config,
                        const ExecOptions& options) {
    if (options.steps < 1) throw ConfigError(fmt::format("steps must be at least 1, not {}.", options.steps));
    if (options.mode != Mode::replay)
        throw ConfigError(
            "the CUDA backend runs replay mode only; train mode runs on the CPU backend (--backend cpu), or use "
            "--mode replay.");
    if (const std::string why = profiler::cuda::cuda_unavailable_reason(); !why.empty())
        throw Error(fmt::format(
            "{}. Run the CUDA backend on a machine with a GPU, one rank per GPU (mpirun -np <gpus> ./dtsim execute "
            "--backend cuda ...), or use the CPU backend (--backend cpu).",
            why));
    const auto [rank, world] = checked_mpi_world(config, /*needs_thread_multiple=*/false);
    const int device = pick_device();

    ExecResult r;
    r.backend = Backend::cuda;
    r.mode = options.mode;
    r.warmup_steps = options.warmup_steps;
    r.rank = rank;
    r.world_size = world;
    r.steps = options.steps;

    // CUPTI first, so that it sees the context from the start; it must work on
    // every rank for the ranks' timings to be alike, so the ranks agree.
    cuda::LaunchTagger tagger;
    profiler::cuda::ActivityCollector collector;
    std::string cupti_error = tagger.start();
    if (cupti_error.empty()) cupti_error = collector.start();
    int cupti_ok = cupti_error.empty() ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &cupti_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (cupti_ok == 0 && cupti_error.empty()) cupti_error = "CUPTI failed on another rank";
    if (!cupti_error.empty()) collector.stop();

    const std::filesystem::path dir = options.scratch_dir.empty() ? std::filesystem::temp_directory_path()
                                                                  : std::filesystem::path(options.scratch_dir);
    const DType dtype = sim::compute_dtype(config.precision);
    std::vector<cuda::StreamWork> work;
    work.reserve(plan.streams.size());
    for (std::size_t s = 0; s < plan.streams.size(); ++s)
        work.emplace_back(plan, workload, static_cast<int>(s), dtype, world,
                          (dir / fmt::format("dtsim-exec-cuda-{}-r{}-s{}.bin", ::getpid(), rank, s)).string());
    cuda::NcclGroups comms(plan, config, rank);
    try {
        cuda::StepRunner runner(plan, work, comms, device, cupti_error.empty());
        int cupti_steps = 0;
        std::int64_t unattributed = 0;  // records no task launched (another thread's launches)
        for (int step = 0; step < options.steps; ++step) {
            if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS) throw Error("MPI_Barrier at the step start failed");
            // Drop what came before the step (buffer fills, the previous step's stragglers).
            if (cupti_error.empty()) collector.flush();
            tagger.take();
            cuda::StepRecord rec = runner.run_step();
            std::optional<std::vector<TaskTiming>> timings;
            const auto task_of_correlation = tagger.take();
            if (cupti_error.empty()) {
                const auto records = collector.flush();
                timings = task_timings_from_cupti(plan, records, task_of_correlation, rec.cupti);
                for (const auto& a : records) unattributed += task_of_correlation.contains(a.correlation) ? 0 : 1;
            }
            if (timings) ++cupti_steps;
            r.timings.push_back(gather_on_rank0(timings ? *timings : rec.event_timings, rank, world));
        }
        r.notes = replay_notes(plan, config, device);
        r.notes.push_back(timing_note(cupti_error, cupti_steps, options.steps));
        if (unattributed > 0)
            r.notes.push_back(fmt::format(
                "{} CUPTI record(s) came from launches outside any task (another thread's, e.g. a library's own); "
                "their tasks may look shorter than they ran.",
                unattributed));
    } catch (...) {
        comms.abort();
        throw;
    }
    collector.stop();
    finish_measured_result(r, plan, workload, config);
    return r;
}

}  // namespace dtsim::executor
