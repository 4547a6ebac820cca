// Built-in hardware presets from datasheets and published collective
// bandwidths, so a first run needs no calibration. Labelled as presets.
#pragma once

#include "dtsim/profiler/calibration.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace dtsim::calib {

struct PresetInfo {
    std::string name;
    std::string description;
};

std::vector<PresetInfo> list_presets();

// A preset by name, or a calibration JSON file when `name_or_path` ends in
// .json or names an existing file. Unknown names list the valid presets.
// `option`: the command-line option that named it, for the error message.
Calibration load_hardware(const std::string& name_or_path, std::string_view option = "--hardware");

}  // namespace dtsim::calib
