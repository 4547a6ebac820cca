#pragma once
// Op-level selective activation checkpointing, as torchtitan applies it
// (`activation_checkpoint.mode = "selective"`, `selective_ac_option = "op"`):
// inside each checkpointed block, torch.utils.checkpoint's selective policy
// saves the outputs of the ops on a save list and recomputes every other op in
// backward. torchtitan's list (`_save_list`, `_apply_op_sac`) holds aten.mm,
// SDPA's flash and memory-efficient kernels and a few others no built-in model
// runs; its policy then recomputes every second aten.mm, counting the mm calls
// of each block's forward from 1 (`meta["forward_mm_count"] % 2 == 0`).
// aten.mm is a Linear without a bias; one with a bias runs aten.addmm, and a
// batched matmul aten.bmm: neither is on the list.

#include "dtsim/models/workload.hpp"

#include <cstdint>
#include <vector>

namespace dtsim::sim {

// Per layer, per forward op: 1 where op-level SAC saves the op's output (so its
// recompute is skipped), for the blocks [first, last] given as pairs of layer
// indices. Layers outside them get an empty mask.
std::vector<std::vector<char>> op_sac_saved_ops(const models::Workload& w,
                                                const std::vector<std::pair<int, int>>& blocks);

// The bytes an op's saved output holds: a GEMM's C (batch x m x n), or for
// SDPA (the "flash.out" op) its output and fp32 logsumexp.
std::int64_t op_sac_output_bytes(const models::Layer& layer, const models::Op& op);

}  // namespace dtsim::sim
