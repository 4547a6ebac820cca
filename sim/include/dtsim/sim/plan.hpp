// Plan: the task graph of one training step, for one representative rank.
// The same Plan is priced by the simulator and run by the executor.
#pragma once

#include "dtsim/profiler/calibration.hpp"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::sim {

using calib::CollectiveKind;

enum class TaskKind : std::uint8_t { compute, collective, copy, host_compute, io };
std::string_view to_string(TaskKind k);

// What a task is for. Compute tasks run a layer's forward ops (forward,
// recompute) or backward ops, or an explicit elementwise pass described by
// bytes/flops (optimizer step, gradient copies, compression math).
enum class Phase : std::uint8_t {
    forward,
    backward,
    recompute,  // activation checkpointing: a segment's forward again, inside backward
    optimizer,
    gradient_copy,
    compression,  // communication-hook math: casts, PowerSGD matmuls
    communication,
    transfer,        // host<->device copies and NVMe I/O
    parameter_copy,  // FSDP2's copy-out of an all-gather into the unsharded parameters
};
std::string_view to_string(Phase p);

// Memory by what it holds. `host` is pinned host memory (offload); every other
// category is device memory.
enum class MemCategory : std::uint8_t {
    parameters,
    gradients,
    optimizer_states,
    activations,
    buckets,         // communication buckets (DDP, ZeRO ipg)
    gathered,        // unsharded parameters and prefetch buffers (FSDP, ZeRO-3)
    error_feedback,  // PowerSGD error-feedback and P/Q state
    other,           // autocast weight copies, temporaries
    host,
};
inline constexpr int kMemCategories = 9;
std::string_view to_string(MemCategory c);
constexpr bool is_host(MemCategory c) {
    return c == MemCategory::host;
}
using MemoryBreakdown = std::array<std::int64_t, kMemCategories>;

// How an optimizer step runs on the device: torch.optim's `fused=True` (and
// DeepSpeed's FusedAdam) in one kernel per chunk of parameters; its `foreach`
// (torch's default on CUDA), each of the algorithm's ops over every tensor at
// once, with one temporary for all of them; or the for-loop (torch's default
// on the CPU), op by op, tensor by tensor (docs/notes/library-memory-rules.md).
enum class OptimizerImpl : std::uint8_t { fused, foreach, for_loop };
std::string_view to_string(OptimizerImpl i);

// What a copy or I/O task moves, and where.
enum class Transfer : std::uint8_t { none, h2d, d2h, nvme_read, nvme_write };
std::string_view to_string(Transfer t);

struct StreamInfo {
    std::string name;  // "compute", "nccl:allreduce", ...
    TaskKind kind;     // the resource class that runs on it
};

// What a collective moves, so that the executor can run any Plan without
// knowing which strategy built it (docs/architecture.md):
enum class CollectiveRole : std::uint8_t {
    other,             // nothing the executor computes with (replay only)
    bucket,            // a gradient bucket reduced whole: Plan::buckets[Task::bucket]'s gradients
    compressed,        // a communication hook's cast bucket (fp16/bf16_compress_hook): its elements in Task::dtype
    uncompressed,      // PowerSGD allreduce #1: the bucket's tensors it leaves uncompressed
    powersgd_p,        // PowerSGD allreduce #2: every P of the bucket
    powersgd_q,        // PowerSGD allreduce #3: every Q of the bucket
    parameter_gather,  // all-gather of the shards of the task's shard groups (Task::shards_*)
    gradient_reduce,   // reduce-scatter, or allreduce, of the task's shard groups' gradients
};
std::string_view to_string(CollectiveRole r);

// One flat tensor split evenly over `ranks` ranks, each owning one shard of
// ceil(numel / ranks) elements (the last padded): FSDP's FlatParameter of a
// unit, ZeRO 1/2's flat partition of all parameters, one ZeRO-3 tensor. The
// parameters it holds, in flat order; `ranks` 1: every rank holds it whole.
struct ShardGroup {
    std::uint32_t param_begin = 0, param_count = 0;  // into Plan::shard_params (parameter indices)
    int ranks = 1;
};

// A DDP communication hook, as the executor runs it (sim/strategies/hooks).
enum class HookKind : std::uint8_t { none, compress, powersgd, other };
struct CommHookSpec {
    HookKind kind = HookKind::none;
    std::string name;  // the registry name, as `--set comm_hook=` takes it
    // PowerSGD (PowerSGDState): iterations before `start_iter` run the vanilla
    // allreduce; each bucket's per-parameter ranks are in BucketInfo::ranks.
    std::int64_t start_iter = 0;
    bool error_feedback = false;
    bool warm_start = false;
    std::string wrapper;  // "fp16" or "bf16": that compress wrapper around it; empty: none
    double orthogonalization_epsilon = 0;
};

// The ranks a collective runs over: `size` ranks spread over `nodes` nodes.
struct CommGroup {
    int size = 1;
    int nodes = 1;
    int per_node() const { return size / nodes; }
};

// Memory a task allocates when it starts (bytes > 0) or frees when it ends (bytes < 0).
struct MemoryDelta {
    MemCategory category;
    std::int64_t bytes;
};

struct Task {
    TaskKind kind = TaskKind::compute;
    Phase phase = Phase::forward;
    std::int32_t stream = 0;
    std::int32_t micro_step = 0;
    std::int32_t layer = -1;   // workload layer for forward/backward compute
    std::int32_t bucket = -1;  // gradient bucket for collectives and copies
    CollectiveKind collective = CollectiveKind::allreduce;
    DType dtype = DType::fp32;                   // collectives: the elements' type (priced by its curve)
    std::int32_t group = -1;                     // index into Plan::groups
    std::int64_t bytes = 0;                      // collective payload, bytes copied, or bytes an explicit pass moves
    double flops = 0;                            // explicit passes: priced at the fp32 GEMM peak
    std::int32_t launches = 0;                   // explicit passes: kernels beyond the first (launch-bound work)
    std::int64_t elements = 0;                   // host optimizer: parameters it updates
    std::int64_t fixed_ns = 0;                   // host tasks of known duration (graph traversals)
    bool torch_cpu_optimizer = false;            // host optimizer: torch.optim on the CPU, not DeepSpeedCPUAdam
    OptimizerImpl optimizer_impl{};              // optimizer passes: how they run (fused by default)
    Transfer transfer = Transfer::none;          // copy and I/O tasks
    bool pinned = true;                          // copies: page-locked host buffer
    bool fresh_output = false;                   // explicit passes: write a tensor allocated for them (first touch)
    CollectiveRole role = CollectiveRole::other;  // collectives: what they move
    std::uint32_t dep_begin = 0, dep_count = 0;  // into Plan::deps
    std::uint32_t mem_begin = 0, mem_count = 0;  // into Plan::memory
};

// A gradient bucket (DDP's Reducer, ZeRO's ipg bucket; GradBucket to a hook).
struct BucketInfo {
    int index = 0;
    std::int64_t bytes = 0;   // gradient bytes (fp32 under DDP)
    std::vector<int> params;  // parameter indices, in the bucket's order
    // PowerSGD: by position in `params`, the rank each gradient is approximated
    // at (viewed as shape[0] x rest), or 0 where it is sent uncompressed.
    std::vector<std::int64_t> ranks;
};

struct Plan {
    std::vector<StreamInfo> streams;
    int compute_stream = 0;  // the stream the model's layers run on: the training loop's own thread
    // The element type the layers compute in: the model's (autocast's under a
    // mixed precision), or the parameters' where the strategy casts them
    // (FSDP's MixedPrecision param_dtype).
    DType compute_dtype = DType::fp32;
    // Op-level selective AC (Config::ac_op): per layer, per forward op, 1
    // where the forward saved the op's output, so that its recompute skips
    // it (sim/selective_ac.hpp). Empty, or an empty mask: recompute every op.
    std::vector<std::vector<char>> recompute_saved;
    std::vector<Task> tasks;  // issue order: each stream runs its tasks in this order
    std::vector<std::int32_t> deps;
    std::vector<MemoryDelta> memory;
    std::vector<CommGroup> groups;
    MemoryBreakdown resident{};  // allocated before the step starts and kept across steps
    std::vector<BucketInfo> buckets;
    std::vector<ShardGroup> shards;          // sharded strategies: the flat tensors split over ranks
    std::vector<std::int32_t> shard_params;  // their parameters, by ShardGroup::param_begin/param_count
    // The shard groups each collective moves (Plan::shards_of): beside the
    // tasks, not in them, which the engine walks thousands of times a second.
    struct TaskShards {
        std::int32_t task = 0;
        std::uint32_t begin = 0, count = 0;  // into task_shards
    };
    std::vector<TaskShards> task_shard_refs;  // by task index, ascending
    std::vector<std::int32_t> task_shards;    // shard group indices
    CommHookSpec hook;                      // DDP's communication hook
    std::vector<std::string> notes;  // facts the summary should tell the user
    // Gradient memory allocated during the step comes fresh from the OS and its
    // first write pays the host's first-touch rate (Config::host_memory_reuse false).
    bool fresh_gradient_pages = false;

    int add_stream(std::string name, TaskKind kind);
    int add_group(CommGroup g);
    // Appends a task depending on `deps` (task indices already in the plan).
    int add_task(Task t, std::span<const std::int32_t> task_deps);
    int add_task(Task t, std::initializer_list<std::int32_t> task_deps) {
        return add_task(t, std::span<const std::int32_t>(task_deps.begin(), task_deps.size()));
    }
    // Memory deltas belong to the most recently added task.
    void alloc(MemCategory c, std::int64_t bytes);
    void release(MemCategory c, std::int64_t bytes);
    // The most recently added task (a collective) moves in `role`; `shard_groups`
    // are the shard groups it moves, where the role names them.
    void set_role(CollectiveRole role, std::span<const std::int32_t> shard_groups = {});
    void set_role(CollectiveRole role, std::initializer_list<std::int32_t> shard_groups) {
        set_role(role, std::span<const std::int32_t>(shard_groups.begin(), shard_groups.size()));
    }
    // Appends a shard group of these parameters, split over `ranks`; returns its index.
    int add_shard_group(std::span<const std::int32_t> params, int ranks);
    std::span<const std::int32_t> params_of(const ShardGroup& g) const {
        return {shard_params.data() + g.param_begin, g.param_count};
    }
    // The shard groups task `task` moves (empty for most tasks).
    std::span<const std::int32_t> shards_of(std::size_t task) const;

    std::span<const std::int32_t> deps_of(const Task& t) const { return {deps.data() + t.dep_begin, t.dep_count}; }
    std::span<const MemoryDelta> memory_of(const Task& t) const { return {memory.data() + t.mem_begin, t.mem_count}; }
};

}  // namespace dtsim::sim
