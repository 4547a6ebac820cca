#include "dtsim/executor/bracketed_refresh.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/executor/calibration_targets.hpp"

namespace dtsim::executor {

BracketedRefresh::BracketedRefresh(calib::Calibration base, std::vector<profiler::CalibrationTargets> targets)
    : base_(std::move(base)), targets_(std::move(targets)) {
    DTSIM_ASSERT(!targets_.empty(), "a bracketed refresh needs at least one run");
    before_ = profiler::refresh_cpu_calibration(base_, targets_.front());
}

const calib::Calibration& BracketedRefresh::after_run() {
    DTSIM_ASSERT(current_ < targets_.size(), "more runs than plans");
    const std::size_t i = current_++;
    before_ = profiler::refresh_cpu_calibration(
        base_, i + 1 < targets_.size() ? joined(targets_[i], targets_[i + 1]) : targets_[i]);
    return before_;
}

}  // namespace dtsim::executor
