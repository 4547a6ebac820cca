// Configurations ready to paste (issue 6): a DeepSpeed JSON, a Lightning
// Trainer with its strategy object, and the plain torch DDP/FSDP call, from a
// simulated sim::Config. Knobs are written with their effective values (the
// strategy's defaults resolved), so what is pasted is what was simulated.
#pragma once

#include "dtsim/sim/config.hpp"

#include <string>
#include <string_view>

namespace dtsim::advisor {

// The simulator strategy a config runs ("deepspeed_stage_3" -> "deepspeed").
std::string emitted_strategy(const sim::Config& config);

// A DeepSpeed config file that `--strategy FILE.json` reads back to the same
// simulation. Only for the "deepspeed" strategy: ConfigError otherwise.
std::string emit_deepspeed_json(const sim::Config& config);

// Python: `from lightning.pytorch import Trainer`, the strategy object and the Trainer.
std::string emit_lightning(const sim::Config& config);

// Python: the DDP(...) / FSDP(...) call with its hook registration, or
// deepspeed.initialize for DeepSpeed.
std::string emit_torch(const sim::Config& config);

// format: "deepspeed", "lightning" or "torch" (ConfigError otherwise).
std::string emit(std::string_view format, const sim::Config& config);

}  // namespace dtsim::advisor
