// Lightning strategy names as users write them (`Trainer(strategy="...")`,
// formats.md §5, strategy-semantics.md §7), mapped onto dtsim's strategies
// and knobs. The launch method is a one-off cost, reported once, never per step.
#pragma once

#include "dtsim/sim/config.hpp"

#include <optional>
#include <string>
#include <vector>

namespace dtsim::sim {

struct LightningStrategy {
    std::string name;      // "deepspeed_stage_3_offload"
    std::string strategy;  // "deepspeed"
    std::vector<std::pair<std::string, std::string>> knobs;
    std::string launch;  // how processes start, and what that costs once
};

const std::vector<LightningStrategy>& lightning_strategies();

// A Lightning strategy written as in Python, e.g.
// "FSDPStrategy(sharding_strategy='SHARD_GRAD_OP', cpu_offload=True)":
//   expression := Class '(' [ keyword '=' value { ',' keyword '=' value } [','] ] ')'
//   Class      := DDPStrategy | FSDPStrategy | DeepSpeedStrategy
//   value      := True | False | None | number | 'text' | "text" | Name{.Name}
//               | '{' Name{.Name} {',' Name{.Name}} [','] '}'    (module classes of a policy;
//               | '[' ... ']' likewise, for the deprecated activation_checkpointing=[Block])
// Each keyword maps onto a dtsim knob (a dotted value keeps its last part:
// ShardingStrategy.SHARD_GRAD_OP is SHARD_GRAD_OP); keywords that change
// nothing dtsim models are accepted and named in `notes`. Anything else is a
// one-line ConfigError that names the character where it went wrong.
// nullopt when `text` is not a call (no '(').
struct LightningExpression {
    LightningStrategy strategy;
    std::vector<std::string> notes;
};
std::optional<LightningExpression> parse_lightning_expression(const std::string& text);

// If config.strategy is a Lightning name or expression, replaces it by the
// dtsim strategy and puts its knobs before the user's (so --set overrides
// them). Returns the launch description, or nothing when it was neither.
std::optional<std::string> resolve_lightning_name(Config& config);

}  // namespace dtsim::sim
