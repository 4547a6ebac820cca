// The search-space options `dtsim sweep` and `dtsim gui` share (--axis,
// --space, --global-batch), and the sweep with a progress bar that `sweep`,
// `advise` and `gui` run. Defined in sweep_command.cpp.
#pragma once

#include "dtsim/advisor/search_space.hpp"
#include "dtsim/advisor/sweep.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace dtsim::cli {

struct SpaceOptions {
    std::vector<std::string> axes;
    std::string space_file;
    std::int64_t global_batch = 0;
    bool given() const { return !axes.empty() || !space_file.empty(); }
};

void add_space_options(CLI::App& cmd, SpaceOptions& s);
advisor::SearchSpace space_from_options(const SpaceOptions& s);

// advisor::run_sweep with a progress bar on a terminal (ETA and the configuration).
std::vector<advisor::SweepResult> run_with_progress(const std::vector<advisor::Candidate>& candidates,
                                                    const calib::Calibration& cal);

}  // namespace dtsim::cli
