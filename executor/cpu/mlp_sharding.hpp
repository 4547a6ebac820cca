// Train mode's sharded state for FSDP and DeepSpeed ZeRO (mlp_sharded.cpp),
// private to executor/cpu.
#pragma once

#include "cpu_backend.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace dtsim::executor::cpu {

// A float buffer allocated uninitialised, as torch.empty allocates: its pages
// are first touched by whoever writes it, not by a zero fill.
class FreshFloats {
public:
    FreshFloats() = default;
    explicit FreshFloats(std::size_t n) : data_(new float[n]), size_(n) {}
    float* data() { return data_.get(); }
    const float* data() const { return data_.get(); }
    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    float& operator[](std::size_t i) { return data_[i]; }
    std::span<float> span() { return {data_.get(), size_}; }

private:
    std::unique_ptr<float[]> data_;
    std::size_t size_ = 0;
};

struct MlpTrainer::Sharding {
    // Parameters flattened in index order and padded to a multiple of `n`;
    // each rank keeps ceil(numel / n) elements (FSDP's flat parameter of a
    // unit, ZeRO 1/2's flat partition, one tensor of ZeRO-3).
    struct Group {
        std::vector<int> params;
        std::vector<std::int64_t> offsets;  // of each parameter in the flat
        std::int64_t numel = 0;
        std::int64_t shard = 0;
        int n = 1;                       // ranks it is sharded over
        int index = 0;                   // this rank's shard
        std::vector<float> param, m, v;  // this rank's shard and its optimizer state
        // This rank's shard of the averaged gradient. A reduction's output
        // becomes it (FSDP's _saved_grad_shard) or adds to it once `grad_set`;
        // zero_grad(set_to_none=True) frees it under fresh_gradients.
        FreshFloats grad;
        bool grad_set = false;
        // The unsharded flat parameter (shard * n, padded), one copy per
        // all-gather of the group in the plan (copies[k]: the k-th), so that an
        // all-gather issued while layers still compute with the copy before it
        // writes its own; the layers compute with views of it.
        std::vector<FreshFloats> copies;
        // Each copy allocated by its all-gather and freed after the last task
        // that computes with it (FSDP's reshard, ZeRO-3's release: the plan's
        // gathered memory); else kept and overwritten (ZeRO 1/2's partition).
        bool transient = false;
    };
    struct Loc {
        int group = -1;
        std::int64_t offset = 0;
    };
    enum class Op : std::uint8_t {
        replay,
        nothing,
        forward,
        backward,
        flatten,  // FSDP's flat gradient: the views' gradients copied into a new tensor
        divide,   // FSDP's division around a reduction: a pass in place (the values are scaled in the reduction)
        optimizer,
        gather,
        reduce_scatter,
        allreduce,
        copy_out  // FSDP2's wait_for_unshard: the all-gather's output copied into the unsharded parameters
    };
    struct Action {
        Op op = Op::replay;
        // Gathers and reduce-scatters: the shard groups they move; a flatten
        // feeding a reduce-scatter: that reduce-scatter's.
        std::vector<int> groups;
        std::vector<int> params;  // allreduces, in the bucket's order
        std::vector<int> copies;  // a gather: which copy of each group it writes (Group::copies)
        // A forward or backward: which copy of its weight's and its bias's
        // groups it computes with (-1: params_, which no all-gather writes).
        int weight_copy = -1, bias_copy = -1;
        struct Copy {
            int group = 0, copy = 0;
        };
        std::vector<Copy> release;  // transient copies this task is the last to compute with
        int flat_from = -1;         // a reduce-scatter: the flatten task that built its input
        FreshFloats flat;           // a flatten feeding a reduce-scatter: its input, built here
        // FSDP2: a gather that a copy-out follows writes `staging` (the all-gather
        // output), and the copy-out (`staged_from`: that gather) moves it into the
        // group's copy the layers compute with.
        bool staged = false;
        FreshFloats staging;
        int staged_from = -1;
    };

    std::vector<Group> groups;
    std::vector<Loc> loc;                      // by parameter index
    const sim::Task* tasks = nullptr;          // the plan's tasks
    std::vector<Action> actions;               // by task index
    std::vector<std::vector<Gradient>> slots;  // full gradients by micro-step
    bool every_micro_step = false;             // reductions each micro-step; else the last reduces all micro-steps' sum
    bool reductions = false;                   // the plan reduces gradients (more than one rank)
    bool gathers = false;                      // full parameters come from all-gathers; else written back from shards
};

}  // namespace dtsim::executor::cpu
