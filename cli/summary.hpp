// The human-readable summary of one simulation.
#pragma once

#include "dtsim/sim/report.hpp"

#include <optional>
#include <string>

namespace dtsim::cli {

std::string summary_text(const sim::SimResult& result, const sim::Config& config, const calib::Calibration& calibration,
                         const sim::ReportExtras& extras);

// One line: "does not fit: ..." with the largest memory consumers and what to try.
std::string does_not_fit_message(const sim::SimResult& result, const sim::Config& config,
                                 const calib::Calibration& calibration);

}  // namespace dtsim::cli
