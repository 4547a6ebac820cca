// The CPU backend's work units, private to executor/: replayed ops on scratch
// buffers, MPI collectives on real buffers, copies, host loops and file I/O,
// and the MLP trainer behind train mode.
#pragma once

#include "dtsim/executor/execute.hpp"
#include "dtsim/runtime/communicator.hpp"
#include "dtsim/runtime/huge_pages.hpp"

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtsim::executor::cpu {

// A vector whose new elements are left uninitialised on resize, as torch.empty
// leaves a tensor: a fresh gradient's pages are first touched by the GEMM that
// writes it (AccumulateGrad keeps that output), not by a zero fill before.
template <class T>
struct UninitAllocator : std::allocator<T> {
    UninitAllocator() = default;
    template <class U>
    UninitAllocator(const UninitAllocator<U>&) noexcept {}
    template <class U>
    void construct(U* p) noexcept {
        ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
};
using Gradient = std::vector<float, UninitAllocator<float>>;

// Scratch buffers of one stream's thread, sized once for its largest task.
struct Scratch {
    // On huge pages, as the calibration's buffers (profiler/huge_pages.hpp).
    runtime::Floats a, b, c;  // GEMM operands
    runtime::Floats mem;      // memory passes, copies, host loops
    runtime::Floats comm;     // collective payloads
    runtime::Floats comm_out;
    std::string file;  // I/O tasks' file
    std::int64_t file_bytes = 0;
};

// Sizes `s` for every task of `stream` (replay work only).
void size_scratch(Scratch& s, const sim::Plan& plan, const models::Workload& w, int stream, int world,
                  const std::string& file);
void release_scratch(Scratch& s);

// How replay runs a collective task: the communicator call the calibration
// measured for its kind and element type. An fp16 allreduce sums halves
// (Communicator::allreduce_sum(Half*), the calibration's fp16 curve); every
// other collective moves its bytes as floats, as the cost model prices
// element types it has no curve for.
struct CollectiveCall {
    calib::CollectiveKind kind = calib::CollectiveKind::allreduce;
    bool half = false;       // elements are halves (2 bytes), else floats
    std::int64_t count = 0;  // elements over the whole group (at least 1)
};
CollectiveCall collective_call(const sim::Task& t);

// Replays one task's work. `comm`: the task's group communicator (collectives only).
void replay_task(const sim::Plan& plan, const models::Workload& w, const sim::Task& t, Scratch& s,
                 runtime::Communicator* comm);

// Train mode: a real MLP under DDP on this rank's shard of the global batch.
class MlpTrainer {
public:
    MlpTrainer(const models::Workload& w, const sim::Config& config, const ExecOptions& options, int rank, int world,
               std::size_t buckets);
    // Train mode for the sharded strategies (FSDP, DeepSpeed ZeRO 1/2/3; DDP
    // works too, as above): parameters, gradients and optimizer state sharded
    // as `plan` says; its all-gathers, reduce-scatters and allreduces move the
    // real shards (mlp_sharded.cpp). Collective: every rank constructs it.
    MlpTrainer(const sim::Plan& plan, const models::Workload& w, const sim::Config& config, const ExecOptions& options,
               int rank, int world);
    ~MlpTrainer();
    MlpTrainer(const MlpTrainer&) = delete;
    MlpTrainer& operator=(const MlpTrainer&) = delete;

    void forward(int micro_step, int layer);
    void backward(int micro_step, int layer);
    // Copies the bucket's gradients into its buffer divided by the world size
    // (torch's Reducer) and issues their allreduce (SUM, comm's
    // allreduce_sum_async); `c.done` runs once it is reduced. Unless `keep` (a
    // gradient_copy task copies them back later),
    // the gradients become views of the reduced bucket, as under
    // gradient_as_bucket_view: the optimizer reads the bucket, nothing is copied back.
    void reduce_bucket(const sim::BucketInfo& bucket, runtime::Communicator& comm, bool keep, runtime::Completion c);
    void copy_buckets_back(const std::vector<sim::BucketInfo>& buckets);
    void optimizer_step(sim::OptimizerImpl impl);
    // This rank's loss of the step (mean of its micro-steps), then reset.
    double take_loss();
    const std::vector<std::vector<float>>& parameters() const { return params_; }
    // Sharded strategies: runs `t` (the plan's task) on the real shards and
    // returns true; false when this trainer is DDP's or `t` is not its work
    // (replay it). `comm`: the task's group communicator (collectives only).
    bool run_sharded(int task, runtime::Communicator* comm);
    // The full parameters, identical on every rank. Collective on
    // MPI_COMM_WORLD for sharded strategies (their shards are all-gathered);
    // call it on every rank, with no other task running.
    std::vector<std::vector<float>> full_parameters() const;
    struct Sharding;  // opaque: mlp_sharding.hpp

    // DDP communication hooks (mlp_hooks.cpp): fp16_compress, bf16_compress
    // and powerSGD with real math, as the plan's hook and bucket ranks say. Call
    // once after construction (DDP); a no-op for the Reducer's own allreduce.
    // Throws ConfigError for hooks train mode cannot run.
    void enable_comm_hook(const sim::Plan& plan, const models::Workload& w, int steps);
    // Runs the plan's bucket collective `t`: reduce_bucket without a hook, else
    // the hook's part of the bucket's reduction that `t` carries (its bytes are
    // checked against the real buffer).
    // Either runs before returning or, where the allreduce is the whole of the
    // task (DDP's own, fp16/bf16's), issues it asynchronously (comm's
    // allreduce_sum_async, gloo's second lane); `c.done` runs exactly once, when
    // the bucket's part is done, with the error it raised, if any.
    void reduce_bucket_task(const sim::Task& t, const sim::BucketInfo& bucket, runtime::Communicator& comm, bool keep,
                            runtime::Completion c);
    // Runs the hook's part of plan task `task` and returns true when it is one
    // of the hook's compression passes (the fp16/bf16 cast before a bucket's
    // allreduce, on the compute stream, and its decompress after it, on the
    // callback stream, as torch runs them; PowerSGD's passes run inside its
    // collectives' tasks, so here they run nothing); false for any other task.
    bool run_hook_pass(int task, bool keep);
    struct HookState;  // opaque: mlp_hooks.cpp

private:
    MlpShape shape_;
    std::int64_t micro_batch_ = 0;
    int world_ = 1, rank_ = 0, accum_ = 1;
    bool adam_ = false;
    double lr_ = 0;
    bool fresh_gradients_ = false;  // ExecOptions::fresh_gradients
    std::int64_t adam_t_ = 0;
    Batch batch_;
    std::vector<std::vector<float>> params_, adam_m_, adam_v_;
    std::vector<Gradient> grads_;
    std::vector<std::vector<float>> acts_;  // acts_[l]: input of linear l; acts_[L]: prediction
    std::vector<float> grad_out_;           // gradient w.r.t. the current layer's output
    std::vector<float> grad_tmp_;
    std::vector<std::vector<float>> bucket_data_;  // reduced buckets awaiting copy_buckets_back
    // gradient_as_bucket_view: by parameter, its gradient's view into its reduced
    // bucket (empty: grads_ holds it), until zero_grad.
    std::vector<std::span<const float>> grad_views_;
    void view_buckets(const sim::BucketInfo& bucket);
    std::span<const float> gradient(std::size_t p) const {
        return grad_views_[p].empty() ? std::span<const float>(grads_[p]) : grad_views_[p];
    }
    double loss_ = 0;
    // Sharded strategies' state; null under DDP.
    std::unique_ptr<Sharding> sharding_;
    // FSDP's flat gradient (the plan's gradient_copy pass): `bytes` copied from
    // the views' gradients into a new tensor, fresh pages under fresh_gradients.
    void flatten(std::int64_t bytes);
    std::vector<float> flatten_from_, flatten_into_;
    // FSDP's `div_` of a gradient (the plan's compression passes): `elements`
    // read, multiplied and written in place, on the calling stream's thread. The
    // reduction itself divides the values by the world size, so the factor here is one.
    static void divide_in_place(std::int64_t elements);
    std::shared_ptr<HookState> hook_;  // null: DDP's default allreduce
    void hook_gather(const sim::BucketInfo& bucket);
    void hook_finish(const sim::BucketInfo& bucket, bool keep);
    void exact_average(int bucket, runtime::Communicator& comm);
    void powersgd_task(const sim::Task& t, const sim::BucketInfo& bucket, runtime::Communicator& comm, bool keep);
    // The layer's forward and backward with these parameters: params_, or
    // views of their shard groups' all-gathered copies.
    void forward_with(int micro_step, int layer, std::span<const float> weight, std::span<const float> bias);
    void backward_into(int micro_step, int layer, std::span<const float> weight, std::vector<Gradient>& grads);
    void sharded_step(sim::OptimizerImpl impl);
    std::size_t first_reduced_micro_step(std::size_t m) const;
    void all_gather(int task, runtime::Communicator& comm);
    std::span<const float> sharded_param(int p, int copy) const;
    void reduce_scatter(int task, runtime::Communicator& comm);
};

// Tests only: when enabled, each hooked bucket reduction also allreduces the
// exact averaged gradient g and records ||result - g||_F / ||g||_F; PowerSGD's
// compressed steps also record ||result - M||_F / ||M||_F, M the averaged
// compressor input (g plus the error feedback).
struct HookDiagnostics {
    bool enabled = false;
    std::vector<double> relative_error;
    std::vector<double> compression_error;
};
HookDiagnostics& hook_diagnostics();

// Train mode's preconditions for a plan with shard groups (FSDP, DeepSpeed
// ZeRO): throws ConfigError naming what in the plan train mode cannot run
// (offload, collectives over other groups, mixed precision, per-owner reduces, ...).
void check_sharded_train(const sim::Plan& plan, const models::Workload& w, const sim::Config& config);

}  // namespace dtsim::executor::cpu
