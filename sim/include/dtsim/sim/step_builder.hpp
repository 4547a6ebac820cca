// The part of a training step every strategy shares, and the verbs strategies
// add their own tasks with. A strategy file drives the loops (micro-steps,
// layers) and puts its communication around forward() and backward(); the
// builder owns what does not depend on the strategy: saved activations,
// activation checkpointing (recompute in backward), autocast weight copies,
// and the plumbing of streams, groups and dependencies.
#pragma once

#include "dtsim/models/workload.hpp"
#include "dtsim/sim/config.hpp"
#include "dtsim/sim/plan.hpp"

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace dtsim::sim {

using Deps = std::span<const std::int32_t>;

class StepBuilder {
public:
    StepBuilder(Plan& plan, const models::Workload& workload, const Config& config);

    Plan& plan() { return plan_; }
    const models::Workload& workload() const { return w_; }
    const Config& config() const { return c_; }
    int layers() const { return static_cast<int>(w_.layers.size()); }

    // Streams by name, created on first use; "compute" exists from the start.
    int stream(const std::string& name, TaskKind kind);
    int compute_stream() const { return compute_; }
    // All ranks; the ranks of one node; one rank per node (same local rank).
    int world_group();
    int node_group();
    int cross_node_group();

    // Layer `layer`'s forward in micro-step m. Allocates what it keeps for
    // backward: its saved activations, or under activation checkpointing only
    // its segment's input.
    std::int32_t forward(int m, int layer, Deps deps = {});
    // Layer `layer`'s backward. Under checkpointing the last layer of a segment
    // is preceded by the segment's recompute, which waits for `deps` (so a
    // strategy's gather before backward also covers the recompute). Frees what
    // forward kept. `fused_bytes`: elementwise work fused into the backward
    // (e.g. copying gradients into a bucket). Returns the backward task.
    std::int32_t backward(int m, int layer, Deps deps = {}, std::int64_t fused_bytes = 0);

    // `dtype`: the elements' type, which picks the calibration's curve (fp32 for
    // any type the calibration did not measure on its own).
    std::int32_t collective(CollectiveKind kind, std::int64_t bytes, int group, int stream, Deps deps, int m,
                            int bucket = -1, DType dtype = DType::fp32);
    // `task`, a collective, is called synchronously by the thread that runs the
    // model: under Config::collectives_block_compute (CPU backends) the next
    // compute task, and every collective issued before it, waits for it to end.
    void synchronous_collective(std::int32_t task);
    // An explicit elementwise pass on a compute stream (optimizer step, casts, copies).
    // `flops` are priced at the fp32 GEMM peak (matmul-like work), `launches`
    // adds that many kernel launch gaps (launch-bound loops).
    std::int32_t pass(Phase phase, std::int64_t bytes, double flops, Deps deps, int m, int stream = -1,
                      int launches = 0);
    std::int32_t copy(Transfer direction, std::int64_t bytes, int stream, Deps deps, int m, bool pinned = true);
    // The optimizer on the CPU: DeepSpeedCPUAdam (SIMD) unless `torch_optimizer`
    // (torch.optim.Adam stepping CPU tensors, as FSDP's CPU offload does).
    std::int32_t host_optimizer(std::int64_t parameters, int stream, Deps deps, int m, bool torch_optimizer = false);
    // Fixed CPU work (graph traversals, Python-side bookkeeping) of `duration_ns`.
    std::int32_t host_task(std::int64_t duration_ns, int stream, Deps deps, int m);
    std::int32_t nvme(Transfer direction, std::int64_t bytes, int stream, Deps deps, int m);

    // What an optimizer step on the device updates, as the optimizer sees it.
    struct Optimized {
        std::int64_t elements = 0;
        std::int64_t tensors = 1;  // parameter tensors (flat parameters under FSDP and ZeRO)
        std::int64_t largest = 0;  // elements of the largest tensor (0: all of them)
        OptimizerImpl impl = OptimizerImpl::fused;
        // Bytes of one element of the parameters, gradients and moments: 4, or 2
        // under Lightning's "true" 16-bit precisions.
        std::int64_t element_bytes = 4;
    };
    // The optimizer step on the device. Adam moves 28 B per fp32 parameter fused
    // and 72 B as torch's foreach and for-loop run it (seven ops); foreach holds a
    // temporary of every parameter, the for-loop up to three of the largest tensor.
    // SGD moves 12 B. Half of each in 16-bit. fp16-mixed adds GradScaler's unscale
    // pass over the gradients.
    std::int32_t optimizer_step(const Optimized& p, Deps deps, int m);

    bool checkpointed(int layer) const;
    // Strategies whose model already is in the compute dtype (DeepSpeed bf16/fp16)
    // run without torch.autocast and make no low-precision weight copies.
    void set_autocast(bool on) { autocast_ = on; }
    bool mixed_precision() const { return autocast(c_.precision); }

private:
    std::int32_t add(Task t, Deps deps);
    // A compute task, after the pending barriers (SyncBatchNorm's collective; on
    // CPU backends the synchronous collectives), which it then clears.
    std::int32_t add_compute(Task t, Deps deps);
    // Any task after the pending barriers, which stay pending.
    std::int32_t add_after_barriers(Task t, Deps deps);
    bool sync_batchnorm(int layer) const;
    std::int64_t autocast_copy_bytes(int layer) const;
    std::int64_t recomputed_bytes(int layer) const;

    Plan& plan_;
    const models::Workload& w_;
    const Config& c_;
    int compute_ = 0;
    // Checkpoint segments: [first, last] layer of each layer's segment, -1 when not checkpointed.
    std::vector<int> segment_first_, segment_last_;
    std::vector<std::int64_t> segment_input_bytes_;  // by segment's first layer
    // Op-level selective AC: what each checkpointed layer's forward saves (its
    // saved ops' outputs); 0 elsewhere.
    std::vector<std::int64_t> op_saved_bytes_;
    std::int64_t autocast_cache_bytes_ = 0;          // checkpointed forwards' casts, freed when forward ends
    std::vector<std::int32_t> compute_barriers_;     // the next compute task waits for these
    bool autocast_ = true;  // the next compute task waits for it (SyncBatchNorm)
};

}  // namespace dtsim::sim
