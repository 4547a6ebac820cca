// A Workload read from a torch.profiler trace of one training step, for
// `dtsim simulate --from-trace`: every op is priced at the time it took in the
// profile, and the simulator then predicts any strategy and scale from it.
//
// What is read (one rank, one ProfilerStep#N or, without step markers, the
// whole trace, on the thread that ran it):
//  - forward: the top-level ops before the first autograd node, in order;
//  - backward: the `autograd::engine::evaluate_function: *` nodes, on that
//    thread or on autograd's own (a GPU model's backward runs there);
//  - parameters: each `torch::autograd::AccumulateGrad` node is one parameter
//    tensor (its shape is the node's Input Dims, its type the Input type);
//  - layers: a layer starts at each forward op that owns parameters (the op
//    whose autograd node, matched by its "Sequence number", produced the
//    gradient that AccumulateGrad consumed next). The forward ops that follow
//    it, and the backward nodes of all of them, belong to it. Parameters are
//    in first-use order, which is model.parameters() order for models that
//    use their modules in definition order;
//  - times, CPU trace: each op's measured_ns is its start to the next
//    top-level op's start (the Python between ops included), so the ops sum
//    to the step; what precedes the forward (zero_grad, data) is charged to
//    the first op;
//  - times, GPU trace: its kernels' (joined to its CPU launches by Kineto's
//    ac2g flows), from its first kernel's start to the next op's, so the ops
//    sum to the GPU's time from the first kernel to the last; collective
//    kernels are left out;
//  - the profiler's own cost: with the step's unprofiled time, taken off
//    each unit in proportion to the ops it recorded;
//  - optimizer: the `Optimizer.step#<Name>.step` annotation, to the step's
//    end, per parameter element; other optimizers stay priced by the model;
//  - saved activations: from Kineto's `[memory]` events (profile_memory=True),
//    the bytes each layer's forward leaves allocated; 0 without them.
// The trace must be of the model without a distributed wrapper (DDP's
// reducer work in it would be counted twice); collectives found in it are
// left out and said so in the notes.
#pragma once

#include "dtsim/models/workload.hpp"
#include "dtsim/traces/trace_model.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace dtsim::traces {

struct TraceWorkloadOptions {
    std::int32_t rank = 0;         // index into TraceModel::ranks
    std::int64_t step = -1;        // N of ProfilerStep#N; -1: the median step by duration
    std::int64_t micro_batch = 1;  // samples in the profiled step (throughput only)
    // The same step's time without the profiler (0: unknown). The profiler's
    // own cost, (step - this) / the step's recorded ops, is then taken off
    // each unit for every op it recorded.
    std::int64_t unprofiled_step_ns = 0;
};

struct TraceWorkload {
    models::Workload workload;
    std::int64_t step = -1;       // the ProfilerStep#N read
    std::int64_t step_ns = 0;     // its measured duration
    std::int64_t forward_ns = 0;  // the phases' measured shares of step_ns
    std::int64_t backward_ns = 0;
    std::int64_t optimizer_ns = 0;  // 0 when the step has no optimizer annotation
    std::int64_t forward_ops = 0;   // top-level forward ops and backward nodes read
    std::int64_t backward_nodes = 0;
    double profiler_ns_per_op = 0;  // taken off per recorded op (TraceWorkloadOptions::unprofiled_step_ns)
    DType param_dtype = DType::fp32;
    std::vector<std::string> notes;  // what was inferred or left out, for the report
};

// `source` names the trace in errors ("FILE: ProfilerStep#3 has no backward
// pass ..."). Throws ParseError when the step cannot be read as a training step.
TraceWorkload workload_from_trace(const TraceModel& model, const std::string& source,
                                  const TraceWorkloadOptions& options = {});

}  // namespace dtsim::traces
