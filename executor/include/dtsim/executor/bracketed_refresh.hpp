// The calibrations that bracket a sequence of runs (compare_bracketed): one
// refreshed for the first plan before it runs, then after each run one
// refreshed for that plan and the next, which prices the run just ended
// ("after") and the next one ("before"). One refresh per run, plus one.
#pragma once

#include "dtsim/profiler/calibrate_cpu.hpp"

#include <cstddef>
#include <vector>

namespace dtsim::executor {

class BracketedRefresh {
public:
    // `targets`: each plan's, in the order the plans run. Refreshes for the
    // first at once. Collective over MPI_COMM_WORLD, as every refresh.
    BracketedRefresh(calib::Calibration base, std::vector<profiler::CalibrationTargets> targets);

    // The calibration to price the current run from before it runs.
    const calib::Calibration& before() const { return before_; }
    // Call after the current run: its second price; the next run's before().
    const calib::Calibration& after_run();

private:
    calib::Calibration base_;
    std::vector<profiler::CalibrationTargets> targets_;
    std::size_t current_ = 0;
    calib::Calibration before_;
};

}  // namespace dtsim::executor
