// The executor's CUDA backend (library dtsim_executor_cuda, built whenever the
// CUDA toolkit is found; DTSIM_HAVE_CUDA): replay mode on one GPU per rank,
// device local rank % device count. Each Plan stream is a CUDA stream: compute
// runs cuBLAS GEMMs (cublasSgemm in fp32, cublasGemmEx with bf16 or fp16
// inputs and fp32 compute under mixed precision) and memory-pass kernels for
// the other ops; each communication stream has its own NCCL communicator per
// group; copy streams cudaMemcpyAsync between device and pinned (or pageable)
// host buffers; host compute and file I/O run on host threads. Cross-stream
// dependencies are cudaEvents; each step starts with an MPI_Barrier. Task
// times come from CUPTI activity records, or from a cudaEvent pair per task
// where CUPTI cannot be used; ExecResult::notes says which.
//
// execute_cuda() is collective like execute(): every rank of MPI_COMM_WORLD
// calls it (MPI initialised; MPI calls stay on the calling thread). It throws
// dtsim::Error starting "no CUDA device" where no GPU is usable, ConfigError
// for train mode (CPU backend only), and dtsim::Error naming any failed CUDA,
// cuBLAS, NCCL or CUPTI call. It has no fault watchdog yet
// (ExecOptions::fault_timeout_s and write_partial_trace are not used).
#pragma once

#include "dtsim/executor/execute.hpp"
#include "dtsim/profiler/cuda_activity.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace dtsim::executor {

ExecResult execute_cuda(const sim::Plan& plan, const models::Workload& workload, const sim::Config& config,
                        const ExecOptions& options);

// What a step's CUPTI timing needs besides the activity records: stamps on
// CUPTI's clock (cuptiGetTimestamp, the records' clock) and which tasks must
// have records.
struct CuptiStep {
    std::uint64_t t0_ns = 0;                                // the step's start
    std::vector<std::uint64_t> host_start_ns, host_end_ns;  // by task: host tasks' own stamps (0 for GPU tasks)
    std::vector<char> launched;                             // by task: launched kernels or copies CUPTI must record
};

// A step's task timings from CUPTI records (pure; public so tests check it
// without a GPU). A GPU task spans its records' first start to last end,
// relative to t0_ns; records of unknown correlation are ignored; a task
// without records that launched nothing (NCCL on one rank, an empty op) takes
// zero time when its stream and dependencies let it start. nullopt when a task
// in `launched` has no record (CUPTI lost it: time the step by events instead).
std::optional<std::vector<TaskTiming>> task_timings_from_cupti(
    const sim::Plan& plan, std::span<const profiler::cuda::ActivityRecord> records,
    const std::unordered_map<std::uint32_t, int>& task_of_correlation, const CuptiStep& step);

}  // namespace dtsim::executor
