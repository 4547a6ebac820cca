// The nccl-tests fuzz targets' shared check: every run an import accepts
// becomes a collective curve, and the calibration that holds it must write
// out and read back (what `dtsim calibrate --import-nccl-tests` does).
#pragma once

#include "dtsim/profiler/calibration.hpp"
#include "dtsim/profiler/fit.hpp"
#include "dtsim/profiler/nccl_tests_import.hpp"
#include "dtsim/profiler/presets.hpp"
#include "fuzz_main.hpp"

#include <vector>

namespace dtsim::fuzz {

inline void import_and_round_trip(const std::vector<profiler::NcclTestsRun>& runs) {
    static const calib::Calibration base = calib::load_hardware("h100-sxm");
    calib::Calibration c = base;
    for (const auto& run : runs)
        c.collectives.push_back(profiler::fit_collective(run.kind, calib::LinkScope::intra_node, run.nranks, run.points));
    const std::string text = calib::to_json_text(c);
    try {
        (void)calib::calibration_from_json_text(text, "imported.json");
    } catch (const dtsim::Error&) {
        __builtin_trap();  // the import wrote a calibration dtsim cannot read
    }
}

}  // namespace dtsim::fuzz
