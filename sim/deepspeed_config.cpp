// Placeholder: DeepSpeed config reading (issue 3).
#include "dtsim/sim/deepspeed_config.hpp"

#include "dtsim/common/error.hpp"

namespace dtsim::sim {

void apply_deepspeed_config(const std::string& path, Config&) {
    throw ConfigError(path + ": reading DeepSpeed config files is not implemented yet");
}

}  // namespace dtsim::sim
