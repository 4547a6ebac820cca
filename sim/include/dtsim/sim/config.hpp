// Config: the strategy and its knobs plus the common part of a training setup,
// named as PyTorch / Lightning / DeepSpeed users name them.
#pragma once

#include "dtsim/common/dtype.hpp"
#include "dtsim/models/model_registry.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dtsim::sim {

// Lightning's precisions (strategy-semantics.md §6). The mixed ones keep fp32
// parameters, gradients and optimizer state and compute under torch.autocast;
// the "true" ones convert the model itself: parameters, gradients and torch's
// optimizer state in the 16-bit dtype, no autocast, no fp32 master copy, no
// GradScaler. DeepSpeed keeps its fp32 master copy under either.
enum class Precision : std::uint8_t { fp32, fp16_mixed, bf16_mixed, fp16_true, bf16_true };
std::string_view to_string(Precision p);
// dtsim's names ("fp32", "fp16-mixed", "bf16-mixed", "fp16-true", "bf16-true")
// and Lightning's ("32-true", "16-mixed", "16-true", ...); "64-true" is refused
// with the reason.
Precision precision_from_string(std::string_view s);
DType compute_dtype(Precision p);              // dtype of activations and GEMMs
bool autocast(Precision p);                    // the mixed precisions
DType parameter_dtype(Precision p);            // what torch's parameters, gradients and optimizer state are stored in
std::string_view lightning_name(Precision p);  // Trainer(precision=...)

enum class OptimizerKind : std::uint8_t { adam, sgd };
std::string_view to_string(OptimizerKind o);
OptimizerKind optimizer_from_string(std::string_view s);

struct Topology {
    int nodes = 1;
    int gpus_per_node = 1;
    int world_size() const { return nodes * gpus_per_node; }
};

struct Config;
// "adam", "adamw" or "sgd": what the user asked for.
std::string_view optimizer_name(const Config& config);

struct Config {
    std::string model = "gpt2";
    std::string strategy = "ddp";
    Topology topology;
    std::int64_t micro_batch = 1;
    std::int64_t seq_len = 0;  // 0: the model's default
    int grad_accum = 1;        // micro-steps per optimizer step (no_sync on all but the last)
    Precision precision = Precision::fp32;
    OptimizerKind optimizer = OptimizerKind::adam;
    // --optimizer adamw: torch.optim.AdamW. Its decoupled weight decay is one
    // more pass over the parameters (_foreach_mul_(params, 1 - lr * wd); fused
    // inside the one kernel with fused=True); its state is Adam's.
    bool decoupled_weight_decay = false;
    models::AttentionImpl attention = models::AttentionImpl::flash;
    // Recompute each transformer block's forward in backward (torch.utils.checkpoint per block).
    bool activation_checkpointing = false;
    // With activation_checkpointing: every ac_freq-th block only (torchtitan's
    // selective AC by layer, `ac_freq`: blocks 2, 4, ... for 2); 1 = every block.
    int ac_freq = 1;
    // With activation_checkpointing: op-level selective AC inside each block
    // (torchtitan's selective_ac_option "op", sim/selective_ac.hpp): the
    // outputs of SDPA and of every other bias-free matmul are saved, and only
    // the other ops are recomputed in backward.
    bool ac_op = false;
    // BatchNorm layers synchronise their statistics across ranks (SyncBatchNorm).
    bool sync_batchnorm = false;
    // The host allocator keeps freed memory for reuse (dtsim's executor tunes
    // glibc so). false: torch's default on CPU, where glibc hands large freed
    // blocks back to the OS and gradients freed by zero_grad(set_to_none=True)
    // are faulted in again by the next backward, at the calibration's
    // host.first_touch_gbps (calibrations without it, GPUs: no cost).
    bool host_memory_reuse = false;
    // A collective the library calls without async_op (FSDP's all-gathers and
    // reduce-scatters: dist.all_gather, dist.reduce_scatter_single) returns
    // only once it has ended. On GPUs that wait is a stream dependency and the
    // CPU runs on; on a CPU backend (gloo, MPI) Work::wait() blocks the thread
    // that runs the model, so no layer computes while the collective runs.
    // Set for CPU hardware by simulate() (a "cpu-..." calibration) and by the
    // CPU executor; never from the command line.
    bool collectives_block_compute = false;
    // Which training iteration to simulate (1-based). Most strategies behave the
    // same from some iteration on; the default stands for that steady state.
    // DDP rebuilds buckets after iteration 1 (2 with static_graph), PowerSGD
    // compresses from start_powerSGD_iter, post-local SGD averages every period.
    std::int64_t iteration = kSteadyIteration;
    static constexpr std::int64_t kSteadyIteration = 1'000'000'001;
    // Strategy knobs as given with --set key=value, by their torch/DeepSpeed names.
    std::vector<std::pair<std::string, std::string>> knobs;
    // NCCL environment variables as given with --env NAME=VALUE (NCCL_ALGO,
    // NCCL_PROTO, NCCL_MIN/MAX_NCHANNELS): they steer the NCCL model's choice
    // (sim/nccl_model.hpp). Validated by parse_nccl_env.
    std::vector<std::pair<std::string, std::string>> env;

    // Throws ConfigError naming the first invalid field (zero GPUs, micro-batch < 1,
    // more GPUs than any cluster, ...) with the reason for its bound.
    void validate() const;

    // Upper bounds, each with its reason in validate()'s message.
    static constexpr std::int64_t kMaxWorldSize = 1 << 20;      // the largest clusters have ~100,000 GPUs
    static constexpr std::int64_t kMaxGpusPerNode = 576;        // NVL576, the largest NVLink domain
    static constexpr std::int64_t kMaxMicroBatch = 1 << 20;
    static constexpr std::int64_t kMaxSeqLen = 1 << 24;         // 16M tokens
    static constexpr std::int64_t kMaxGradAccum = 1 << 20;
    static constexpr std::int64_t kMaxAcFreq = 1 << 20;
};

}  // namespace dtsim::sim
