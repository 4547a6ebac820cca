// What a replayed task runs, shared by the CPU and CUDA backends (private to
// executor/): the ops of its layer and the bytes of its memory pass.
#pragma once

#include "dtsim/models/workload.hpp"
#include "dtsim/sim/plan.hpp"

#include <cstdint>
#include <vector>

namespace dtsim::executor {

// A compute task's ops: its layer's forward or backward ops; nullptr for a
// task without a layer (optimizer, copies, explicit passes).
const std::vector<models::Op>* ops_of(const models::Workload& w, const sim::Task& t);

// Whether op k of ops_of(w, t) runs: all do, except in a recompute under
// op-level selective AC, which skips the ops whose outputs the forward saved
// (Plan::recompute_saved).
bool replays_op(const sim::Plan& plan, const sim::Task& t, std::size_t k);

// Bytes a memory pass of this task moves: the largest of its own bytes and its
// ops' elementwise bytes (elementwise ops, explicit passes, fused work).
std::int64_t memory_pass_bytes(const models::Workload& w, const sim::Task& t);

}  // namespace dtsim::executor
