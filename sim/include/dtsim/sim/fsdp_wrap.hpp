// FSDP's auto-wrap policies (strategy-semantics.md §3.2): which unit each layer
// belongs to. Shared by the FSDP strategy and the executor's sharded training,
// so both shard the same units.
#pragma once

#include "dtsim/models/workload.hpp"
#include "dtsim/sim/knobs.hpp"

#include <string>
#include <vector>

namespace dtsim::sim {

inline constexpr int kFsdpRootUnit = 0;  // every layer no child unit wraps

// The auto_wrap_policy in force: the knob's value, except that Lightning's
// FSDPStrategy (frontend=lightning) passes none unless one is given, so
// FullyShardedDataParallel(model) makes one unit, the root.
std::string fsdp_wrap_policy(const Knobs& knobs);

// The unit of every layer. auto_wrap_policy "transformer" wraps each
// transformer block (each distinct `block` >= 0, as transformer_auto_wrap_policy
// on the block class); "size" groups consecutive layers greedily until a group
// holds min_num_params (size_based_auto_wrap_policy, flattened to the layer
// list). Layers left over belong to the root unit; units are numbered in
// forward order from 1.
std::vector<int> fsdp_unit_of_layer(const models::Workload& w, const Knobs& knobs);
// The same for a policy given by name ("transformer", "size" with
// `min_num_params`, or "none").
std::vector<int> fsdp_unit_of_layer(const models::Workload& w, const std::string& policy, double min_num_params);

}  // namespace dtsim::sim
