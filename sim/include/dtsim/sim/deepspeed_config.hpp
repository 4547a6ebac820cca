// DeepSpeed config files (formats.md §4): `--strategy ds_config.json` reads
// the zero_optimization section into the ZeRO strategy's knobs, and the batch,
// accumulation and precision fields into the Config, accepting "auto".
#pragma once

#include "dtsim/sim/config.hpp"

#include <string>
#include <vector>

namespace dtsim::sim {

// Sets config.strategy and config.knobs (and, where the file gives numbers
// rather than "auto", micro_batch, grad_accum and precision). Errors name the
// file and the JSON field (ParseError). Returns notes, one line each, on keys
// DeepSpeed accepts that change nothing dtsim models.
std::vector<std::string> apply_deepspeed_config(const std::string& path, Config& config);
// The same from the file's text; `path` names it in errors.
std::vector<std::string> apply_deepspeed_config_text(const std::string& text, const std::string& path, Config& config);

}  // namespace dtsim::sim
