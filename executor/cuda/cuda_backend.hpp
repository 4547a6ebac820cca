// The CUDA backend's parts, private to executor/cuda: NCCL communicators per
// (stream, group), each Plan stream's replay work and buffers, CUPTI launch
// correlation, the per-step scheduler and the measured result.
#pragma once

#include "cuda_handles.hpp"
#include "dtsim/common/dtype.hpp"
#include "dtsim/executor/execute_cuda.hpp"

#include "../cpu/cpu_backend.hpp"

#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dtsim::executor::cuda {

// Host compute and file I/O run on the host, everything else on a CUDA stream.
bool is_host_task(const sim::Task& t);

// NCCL communicators (nccl_groups.cpp): one per (communication stream, group)
// some collective uses, formed from the ranks the CPU backend's MPI split puts
// together, so that concurrent streams never share one. Collective on
// MPI_COMM_WORLD; the calling thread's device must be set.
class NcclGroups {
public:
    NcclGroups(const sim::Plan& plan, const sim::Config& config, int rank);
    ~NcclGroups();
    NcclGroups(const NcclGroups&) = delete;
    NcclGroups& operator=(const NcclGroups&) = delete;
    ncclComm_t get(int stream, int group) const;
    // After a failure: abort the communicators so that no destroy waits on a peer.
    void abort();

private:
    std::map<std::pair<int, int>, ncclComm_t> comms_;
    bool aborted_ = false;
};

// One Plan stream's replay work (stream_work.cpp): its CUDA stream, cuBLAS
// handle and scratch buffers, sized once for its largest task; host tasks on
// the CPU backend's scratch.
class StreamWork {
public:
    StreamWork(const sim::Plan& plan, const models::Workload& w, int stream, DType gemm_dtype, int world,
               const std::string& io_file);
    ~StreamWork();
    StreamWork(StreamWork&&) noexcept;
    StreamWork& operator=(StreamWork&&) = delete;
    StreamWork(const StreamWork&) = delete;
    StreamWork& operator=(const StreamWork&) = delete;

    // Null for a stream of host tasks only.
    cudaStream_t stream() const { return stream_ ? stream_->get() : nullptr; }
    // Enqueues task `t`'s work on the stream. Returns true when it launched
    // kernels or copies that CUPTI must record (NCCL may launch none on one rank).
    bool enqueue(const sim::Task& t, ncclComm_t comm);
    // Runs a host task on the calling thread (Adam loop, spin, file I/O).
    void run_host(const sim::Task& t);

private:
    bool gemm(const models::Op& op);
    bool memory_pass(std::int64_t bytes);
    void collective(const sim::Task& t, ncclComm_t comm);
    bool copy(const sim::Task& t);

    const sim::Plan* plan_;
    const models::Workload* w_;
    DType dtype_;
    std::optional<Stream> stream_;
    std::optional<CublasHandle> cublas_;
    DeviceBuffer a_, b_, c_;  // GEMM operands (dtype_)
    std::size_t c_elems_ = 0;
    DeviceBuffer mem_;  // memory passes (floats)
    std::size_t mem_floats_ = 0;
    DeviceBuffer comm_;  // collective payloads (floats, in place)
    DeviceBuffer copy_dev_;
    HostBuffer copy_pinned_, copy_pageable_;
    std::unique_ptr<cpu::Scratch> host_;  // host tasks
};

// CUPTI callbacks on the runtime and driver APIs (launch_correlation.cpp): while
// a thread has a task set, every API call it makes is attributed to that task
// by its correlation id, which the kernel and memcpy activity records carry.
// One at a time per process (CUPTI allows a single subscriber).
class LaunchTagger {
public:
    LaunchTagger() = default;
    ~LaunchTagger();
    LaunchTagger(const LaunchTagger&) = delete;
    LaunchTagger& operator=(const LaunchTagger&) = delete;
    // Subscribes; returns why it could not, empty on success.
    std::string start();
    // The calling thread's current task (-1: none).
    static void set_task(int task);
    // Correlation id -> task of the calls since the last take.
    std::unordered_map<std::uint32_t, int> take();
    void record(std::uint32_t correlation);  // from the callback

private:
    void* subscriber_ = nullptr;  // CUpti_SubscriberHandle
    std::mutex mu_;
    std::unordered_map<std::uint32_t, int> tasks_;
};

// What one step left behind for timing (step_runner.cpp).
struct StepRecord {
    // Per task, relative to the step start: GPU tasks from their cudaEvent pair,
    // host tasks from the steady clock.
    std::vector<TaskTiming> event_timings;
    CuptiStep cupti;  // CUPTI clock stamps of the step start and host tasks
};

// Issues one step's tasks: a host thread per Plan stream, each enqueueing its
// tasks in issue order; a dependency on another stream's GPU task is a
// cudaStreamWaitEvent on its end event (a host task synchronises on it), a
// dependency on a host task waits on the host for it to end.
class StepRunner {
public:
    StepRunner(const sim::Plan& plan, std::vector<StreamWork>& work, const NcclGroups& comms, int device,
               bool cupti_clock);
    // Runs the next step and waits for every stream to finish it.
    StepRecord run_step();

private:
    void stream_loop(int stream, StepRecord& rec);

    const sim::Plan& plan_;
    std::vector<StreamWork>& work_;
    const NcclGroups& comms_;
    int device_ = 0;
    bool cupti_clock_ = false;
    std::vector<std::vector<int>> by_stream_;
    std::vector<Event> start_, end_;  // per task
    Event t0_;
    std::chrono::steady_clock::time_point host_t0_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<char> issued_;  // per task: end event recorded (GPU) or ended (host)
    bool failed_ = false;
};

}  // namespace dtsim::executor::cuda
