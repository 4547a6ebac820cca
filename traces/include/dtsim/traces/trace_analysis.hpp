// What a read trace says about a training step, in the terms HTA (Holistic
// Trace Analysis, formats.md §3) and nccl-tests (§8) use, computed from a
// TraceModel: per rank and per ProfilerStep#N step (or the whole trace when
// it has no step markers) the step time, the temporal breakdown, the
// communication/computation overlap and idle time by cause; per rank the
// top ops or kernels; every collective with its size, algbw, busbw and the
// straggler that entered it last. Deterministic: the same model gives the
// same figures in the same order.
//
// The breakdown's basis depends on what the trace holds (StepAnalysis::basis):
//  - gpu_kernels (a Kineto GPU trace): as HTA's get_temporal_breakdown, over
//    the rank's GPU stream tracks. compute = the union of compute-kernel
//    time; non_compute = the union of communication (NCCL) and memory
//    (memcpy/memset) time when no compute kernel runs; idle = the window less
//    both. Communication or memory under compute counts as compute.
//  - cpu_main_thread (a CPU-only trace, e.g. torch + gloo): over the main
//    thread (the thread holding ProfilerStep#N; without steps, the CPU thread
//    with the most cpu_op time). compute = the union of the main thread's
//    non-communication cpu_ops; non_compute = the union of communication
//    spans on any thread of the rank (gloo:* on the gloo run-loop threads,
//    c10d::* enqueues) while the main thread runs no compute op; idle = the
//    rest of the window (for DDP, mostly the wait for the last allreduces,
//    which is no event: formats.md §2). HTA itself returns nothing here.
//  - dtsim_streams (dtsim's own traces): as gpu_kernels, over every stream
//    track, with dtsim's compute / collective / copy categories.
// The window of a step is its ProfilerStep#N span; on GPU traces, the GPU's
// ProfilerStep#N (gpu_user_annotation) span when the trace has one.
#pragma once

#include "dtsim/traces/trace_model.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace dtsim::traces {

struct AnalysisOptions {
    std::int64_t step = -1;      // only ProfilerStep#<step>; -1: every step
    std::size_t top_k = 10;      // ops per rank in TraceAnalysis::top_ops
};

enum class BreakdownBasis : std::uint8_t { gpu_kernels, cpu_main_thread, dtsim_streams };
std::string_view to_string(BreakdownBasis basis);

struct TemporalBreakdown {
    std::int64_t idle_ns = 0;
    std::int64_t compute_ns = 0;      // compute running, with or without communication/memory under it
    std::int64_t non_compute_ns = 0;  // communication or memory running without compute
};

// HTA's get_idle_time_breakdown, summed over the rank's GPU streams: a gap
// between consecutive kernels on a stream is kernel wait when shorter than
// 30 ns, host wait when the next kernel's launch (its ac2g flow's CPU end)
// started after the previous kernel ended, other wait otherwise.
struct IdleCauses {
    bool computable = false;  // only on GPU traces with launch flows
    std::int64_t host_wait_ns = 0;
    std::int64_t kernel_wait_ns = 0;
    std::int64_t other_wait_ns = 0;
};

struct StepAnalysis {
    std::int32_t rank = 0;       // index into TraceModel::ranks
    std::int64_t step = -1;      // N of ProfilerStep#N; -1: the whole trace (no step markers)
    std::int64_t start_ns = 0;   // as written in the rank's file
    std::int64_t dur_ns = 0;     // the step time (the CPU ProfilerStep#N span)
    BreakdownBasis basis = BreakdownBasis::cpu_main_thread;
    std::int64_t window_ns = 0;  // length of the window the breakdown covers
    TemporalBreakdown breakdown;
    std::int64_t comm_ns = 0;             // union of communication time in the window
    std::int64_t comm_under_compute_ns = 0;  // of which compute ran at the same time
    // HTA's comm/comp overlap: comm_under_compute_ns / comm_ns; 0 without communication.
    double overlap_ratio = 0;
    IdleCauses idle;
    // The most memory allocated during the step (torch.profiler's [memory]
    // events with profile_memory=True: "Total Allocated"), on the device when
    // the trace has device memory, else on the CPU; -1: no memory events.
    double peak_allocated_bytes = -1;
    std::string memory_series;  // which counter: "[memory] CPU", "[memory] GPU 0", ...
};

// Spans of one name on one rank inside the analysed steps (kernels and GPU
// memory operations on GPU traces, cpu_ops on any CPU thread on CPU traces
// (inclusive times, as HTA's ops summary), every task on dtsim traces).
struct OpSummary {
    std::int32_t rank = 0;
    std::string name;
    SpanKind kind = SpanKind::other;
    std::int64_t count = 0;
    std::int64_t total_ns = 0;
    std::int64_t min_ns = 0;
    std::int64_t max_ns = 0;
    double mean_ns = 0;
};

// HTA's user-annotation breakdown (get_gpu_user_annotation_breakdown with
// use_gpu_annotation=False): user_annotation spans by name, per rank, over
// the whole trace (only the chosen step with AnalysisOptions::step).
struct AnnotationSummary {
    std::int32_t rank = 0;
    std::string name;
    std::int64_t count = 0;
    std::int64_t total_ns = 0;
    std::int64_t min_ns = 0;
    std::int64_t max_ns = 0;
    double mean_ns = 0;
};

// One collective on one rank. Size S and the bandwidths follow nccl-tests
// (formats.md §8): algbw = S / time (GB = 1e9 B), busbw = algbw x 2(n-1)/n
// for allreduce, (n-1)/n for allgather, reducescatter and alltoall, 1 for
// broadcast, reduce and sendrecv; S is the whole buffer (count x type size
// x n for allgather and reducescatter). NCCL kernels take op, dtype and
// element counts from Kineto's collective args (else the op from the kernel
// name); gloo ops are paired with their c10d::* enqueue op in start order
// and sized from Input Dims x Input type.
struct CollectiveCall {
    std::int32_t rank = 0;      // index into TraceModel::ranks
    std::int32_t ordinal = 0;   // k: the k-th collective of this rank (in the analysed steps)
    std::string op;             // allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv, barrier, unknown
    std::string name;           // the span's name (kernel, gloo:*, dtsim task)
    std::string dtype;          // as the trace names it; empty when unknown
    std::int64_t start_ns = 0;  // when the rank entered it (gloo: its c10d enqueue), as written
    std::int64_t dur_ns = 0;    // the collective's own span (NCCL kernel, gloo:* op, dtsim task)
    std::int64_t size_bytes = 0;  // S; 0 when the trace does not say
    std::int32_t group_size = 0;
    double algbw_gbps = 0;
    double busbw_gbps = 0;
    // The rank (RankInfo::rank) that entered the k-th collective last, by
    // absolute time (base_time_ns + start); -1 with one rank. lag: its entry
    // less the earliest rank's entry.
    std::int32_t straggler_rank = -1;
    std::int64_t straggler_lag_ns = 0;
};

struct TraceAnalysis {
    std::vector<StepAnalysis> steps;            // by rank, then step
    std::vector<OpSummary> top_ops;             // per rank: top_k by total time, then name
    std::vector<AnnotationSummary> annotations; // per rank: by total time, then name
    std::vector<CollectiveCall> collectives;    // by rank, then ordinal
    std::vector<std::string> notes;             // what could not be computed, and why
};

TraceAnalysis analyze_trace(const TraceModel& model, const AnalysisOptions& options = {});

// nccl-tests' bus-bandwidth factor for `op` on `ranks` ranks (1 when unknown).
double bus_bandwidth_factor(std::string_view op, std::int32_t ranks);

}  // namespace dtsim::traces
