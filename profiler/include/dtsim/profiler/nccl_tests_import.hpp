// Reads nccl-tests output, the text table or the -J JSON (formats.md §8), into
// collective curves.
#pragma once

#include "dtsim/profiler/calibration.hpp"

#include <string>
#include <vector>

namespace dtsim::profiler {

struct NcclTestsRun {
    calib::CollectiveKind kind;
    int nranks = 0;
    std::vector<calib::CollectivePoint> points;  // out-of-place times
    std::string nccl_version;                    // when the output says
};

// Parse errors name the file and the line (text) or JSON field.
std::vector<NcclTestsRun> parse_nccl_tests_text(const std::string& text, const std::string& file);
std::vector<NcclTestsRun> parse_nccl_tests_json(const std::string& text, const std::string& file);
// Either form, by content.
std::vector<NcclTestsRun> parse_nccl_tests(const std::string& text, const std::string& file);
std::vector<NcclTestsRun> read_nccl_tests(const std::string& path);

}  // namespace dtsim::profiler
