// Train mode's sharded state for FSDP and DeepSpeed ZeRO (mlp_sharded.cpp),
// private to executor/cpu.
#pragma once

#include "cpu_backend.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace dtsim::executor::cpu {

struct MlpTrainer::Sharding {
    // Parameters flattened in index order and padded to a multiple of `n`;
    // each rank keeps ceil(numel / n) elements (FSDP's flat parameter of a
    // unit, ZeRO 1/2's flat partition, one tensor of ZeRO-3).
    struct Group {
        std::vector<int> params;
        std::vector<std::int64_t> offsets;  // of each parameter in the flat
        std::int64_t numel = 0;
        std::int64_t shard = 0;
        int n = 1;                             // ranks it is sharded over
        int index = 0;                         // this rank's shard
        std::vector<float> param, grad, m, v;  // this rank's shard and its optimizer state
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
        allreduce
    };
    struct Action {
        Op op = Op::replay;
        std::vector<int> groups;  // gathers and reduce-scatters
        std::vector<int> params;  // allreduces, in the bucket's order
    };

    std::vector<Group> groups;
    std::vector<Loc> loc;                                // by parameter index
    const sim::Task* tasks = nullptr;                    // the plan's tasks
    std::vector<Action> actions;                         // by task index
    std::vector<std::vector<std::vector<float>>> slots;  // full gradients by micro-step
    bool every_micro_step = false;  // reductions each micro-step; else the last reduces all micro-steps' sum
    bool reductions = false;        // the plan reduces gradients (more than one rank)
    bool gathers = false;           // full parameters come from all-gathers; else written back from shards
};

}  // namespace dtsim::executor::cpu
