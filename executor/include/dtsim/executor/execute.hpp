// The reference executor: runs a Plan for real and records when each task ran.
// CPU backend: OpenBLAS GEMMs and memory passes on the compute stream's thread
// (at the lowest priority: communication first), one thread per other stream (real MPI collectives on one
// communicator per stream, memcpy copies, host loops, file I/O).
//
// execute() is collective: every rank of MPI_COMM_WORLD calls it with the same
// Plan, Workload, Config and options. MPI must be initialised with
// MPI_THREAD_MULTIPLE (ensure_mpi() does that when the caller has not).
//
// Faults: with fault_timeout_s > 0 a watchdog thread per rank exchanges
// heartbeats with the others; when no rank has made progress (ended a task or
// started a step) for fault_timeout_s, every rank prints a line to stderr,
//   dtsim: error: rank R: no progress on any rank for N s in step S (waiting on
//   task T: <name>, a <collective> over <n> ranks); rank(s) X did not reach it; ...
// rank 0 hands the steps completed so far to write_partial_trace, and the job
// stops with MPI_Abort (exit status 4). A rank that dies makes mpirun stop the
// others with SIGTERM; the watchdog catches it, prints the same kind of line
// and has rank 0 write the partial trace before dying of the signal.
// Test hook: DTSIM_FAULT_INJECT="rank=R,step=S,kind=exit|kill|hang" makes rank R
// exit (status 3), die of SIGKILL, or hang inside its first compute task at the
// start of step S (tests only; a malformed value is a ConfigError).
#pragma once

#include "dtsim/models/workload.hpp"
#include "dtsim/profiler/mpi_init.hpp"
#include "dtsim/runtime/communicator.hpp"
#include "dtsim/sim/config.hpp"
#include "dtsim/sim/plan.hpp"
#include "dtsim/sim/timeline.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::executor {

enum class Mode : std::uint8_t {
    // Every model: each task's work at its shapes on scratch buffers.
    replay,
    // MLP models in fp32 under DDP, FSDP (not hybrid) and ZeRO 1/2/3 without offload:
    // real tensors, real (sharded) gradients and optimizer state, real collectives.
    train,
};
std::string_view to_string(Mode m);
Mode mode_from_string(std::string_view s);  // "replay" or "train"; throws ConfigError

struct ExecOptions {
    int steps = 3;
    // Steps left out of the median, the per-kind times and the peak memory
    // (MPI and the caches settle over the first); fewer when steps are few.
    int warmup_steps = 1;
    Mode mode = Mode::replay;
    double learning_rate = 1e-2;  // train mode: SGD and Adam (betas 0.9, 0.999, eps 1e-8)
    std::uint64_t seed = 1;       // train mode: initial parameters and the synthetic batch
    std::string scratch_dir;      // I/O tasks write and read files here; empty: the system temp dir
    // The CPU backend's collectives: MPI, or gloo over TCP as torch's
    // ProcessGroupGloo runs them (its reduce-scatter an allreduce of the whole
    // buffer), so that the executor stands in for torch on CPU.
    runtime::CommBackend transport = runtime::CommBackend::mpi;
    // Over gloo: how an fp16 allreduce sums (the fp16 hook's), as the torch stood in for does.
    runtime::HalfSum half_sum = runtime::HalfSum::c10;
    // Train mode: free every gradient at the step's end and allocate it again
    // at its first write in backward, as torch's zero_grad(set_to_none=True)
    // and autograd do, so that each step pays the pages' first touch. Pair it
    // with ensure_mpi(false) (glibc's default malloc, which returns large
    // blocks to the system) and Config::host_memory_reuse = false.
    bool fresh_gradients = false;
    // Stop the job when no rank makes progress for this long (seconds); 0: no watchdog.
    double fault_timeout_s = 30;
    // Rank 0: the measured timeline of the steps every rank completed, titled
    // "partial: K of N step(s) completed". Called between steps as the run
    // goes (after each until the writes have cost 50 ms of CPU, then within 5 %
    // of the wall time), so that the steps survive a rank 0 killed outright,
    // and from the watchdog thread on a fault, just before the job stops. The
    // run's own trace replaces it at the end.
    std::function<void(const sim::Timeline&)> write_partial_trace;
};

struct TaskTiming {
    std::int64_t start_ns = 0;  // relative to the step's barrier'd start on that rank
    std::int64_t end_ns = 0;
};

enum class Backend : std::uint8_t { cpu, cuda };
// "CPU" or "CUDA".
std::string_view to_string(Backend b);

struct ExecResult {
    Backend backend = Backend::cpu;
    runtime::CommBackend transport = runtime::CommBackend::mpi;  // the CPU backend's collectives
    Mode mode = Mode::replay;
    int rank = 0;
    int world_size = 1;
    int steps = 0;
    int warmup_steps = 0;  // ExecOptions::warmup_steps (first_measured_step bounds it)
    // timings[step][rank][task]: every rank on rank 0, only its own row elsewhere
    // (timings[step][0] then is this rank's).
    std::vector<std::vector<std::vector<TaskTiming>>> timings;
    // Rank 0: one process per rank, the plan's streams as threads, every step
    // laid end to end (arg "step"). Other ranks: empty events.
    sim::Timeline timeline;
    std::vector<double> step_time_s;  // per step: the latest task end over all ranks (same on every rank)
    double median_step_time_s = 0;    // median over the steps after warmup_steps
    // Peak device memory of a step, the Plan's allocations at their tasks'
    // measured times (measured_memory.hpp): the maximum over ranks and over the
    // steps after warm-up, on rank 0 (elsewhere this rank's).
    std::int64_t peak_memory_bytes = 0;
    // This process's peak resident set (VmHWM), maximum over ranks (same on
    // every rank): the real tensors in train mode, scratch buffers in replay.
    std::int64_t peak_rss_bytes = 0;
    // Minor page faults of this process in each step (getrusage): the first
    // touches of memory fresh from the system. Per step on this rank; the
    // median over the measured steps, the maximum over ranks (same on every rank).
    std::vector<double> step_page_faults;
    double page_faults_per_step = 0;
    std::vector<double> loss;  // train mode: per step, mean over the global batch (same on every rank)
    // Train mode: this rank's parameters after the last step, by parameter index.
    std::vector<std::vector<float>> parameters;
    std::vector<std::string> notes;  // what ran for real and what was approximated or skipped
};

// Initialises MPI with MPI_THREAD_MULTIPLE when nobody has (a singleton
// outside mpirun) and finalises it at exit. Sets OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)
// unless already set.
using profiler::ensure_mpi;

ExecResult execute(const sim::Plan& plan, const models::Workload& workload, const sim::Config& config,
                   const ExecOptions& options);

// Several lines: mode, ranks, step times, median, loss, notes.
std::string format_execution_summary(const ExecResult& result);

// Train mode's data and initial state, public so that tests and benchmarks can
// reproduce the same training without the executor.
struct MlpShape {
    int layers = 0;
    std::int64_t width = 0;
};
MlpShape mlp_shape(const models::Workload& workload);  // throws ConfigError for a non-MLP workload
// Row-major [rows x width] inputs and targets of the deterministic global batch.
struct Batch {
    std::vector<float> inputs;
    std::vector<float> targets;
};
Batch synthetic_batch(std::int64_t rows, std::int64_t width, std::uint64_t seed);
// Initial parameters by parameter index (weights [out, in] row-major, biases),
// torch's default Linear init range, deterministic in the seed.
std::vector<std::vector<float>> initial_parameters(const models::Workload& workload, std::uint64_t seed);

}  // namespace dtsim::executor
